"""The signed image's exports on a real Docker engine: the exported pod settings run the
image as a kubelet would, a Triton model repository holds the verified engine, and bad
input is refused with nothing written."""

from __future__ import annotations

import json
import secrets
import time
import urllib.request
from pathlib import Path

import grpc
import numpy as np
import onnxruntime as ort
import pytest
import yaml
from deploy_e2e import mmaas
from google.protobuf import text_format
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tritonclient.grpc import model_config_pb2 as triton

from docker_fixtures import wait_for_grpc_serving
from mmaas.core import proc
from mmaas.core.hashing import file_digests

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_exported_pod_settings_run_the_image(signed, docker_cli, keys, tmp_path: Path) -> None:
    """The Deployment's container settings, applied by Docker as a kubelet would: its env
    (trusted key, engine pin, threads), user 10001, a read-only root file system with
    /tmp writable, no capabilities, no privilege escalation. The server comes up SERVING
    on gRPC, live where the liveness probe asks (and on HTTP), and SIGTERM ends it (exit 0)
    well within the grace period."""
    folder, image = signed
    out = tmp_path / "plain"
    done = mmaas(
        "export",
        "kserve",
        str(folder),
        "-o",
        str(out),
        "--plain",
        "--trusted-key",
        str(keys["public"]),
    )
    assert done.returncode == 0, done.stderr
    assert "never pushed" in done.stderr  # no digest yet: the tag, and a warning
    deployment = yaml.safe_load((out / "deployment.yaml").read_text())
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == image
    security = container["securityContext"]
    argv = [
        *docker_cli,
        "run",
        "--detach",
        "--init",
        "--read-only",
        "--tmpfs",
        "/tmp",
        "--user",
        str(security["runAsUser"]),
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "--publish",
        "127.0.0.1::8001",
        "--publish",
        "127.0.0.1::8000",
    ]
    for item in container["env"]:
        argv += ["--env", f"{item['name']}={item['value']}"]
    started = proc.run([*argv, image]).stdout.strip()
    try:

        def port(number: int) -> int:
            return int(
                proc.run([*docker_cli, "port", started, f"{number}/tcp"]).stdout.split(":")[-1]
            )

        wait_for_grpc_serving(port(8001), timeout=90)
        live = container["livenessProbe"]["grpc"]  # the routed port's health, service live
        with grpc.insecure_channel(f"127.0.0.1:{port(live['port'])}") as channel:
            request = health_pb2.HealthCheckRequest(service=live["service"])
            reply = health_pb2_grpc.HealthStub(channel).Check(request, timeout=10)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        with urllib.request.urlopen(f"http://127.0.0.1:{port(8000)}/v2/health/live") as r:
            assert r.status == 200
        grace = pod["terminationGracePeriodSeconds"]
        began = time.monotonic()
        proc.run([*docker_cli, "stop", "--time", str(grace), started])
        took = time.monotonic() - began
        state = json.loads(proc.run([*docker_cli, "inspect", started]).stdout)[0]["State"]
        assert state["ExitCode"] == 0, proc.run([*docker_cli, "logs", started]).stderr[-2000:]
        assert took < grace
    finally:
        proc.run([*docker_cli, "rm", "--force", started], check=False)


def test_triton_repository_holds_the_verified_engine(signed, ppocr_models, tmp_path) -> None:
    folder, _ = signed
    repository = tmp_path / "repository"
    (repository / "other-model").mkdir(parents=True)  # another model: left alone
    done = mmaas("export", "triton", str(folder), "-o", str(repository))
    assert done.returncode == 0, done.stderr
    model = repository / "ppocr-det"
    config = text_format.Parse((model / "config.pbtxt").read_text(), triton.ModelConfig())
    parameters = {key: value.string_value for key, value in config.parameters.items()}
    assert file_digests(model / "1" / "model.onnx")["blake3"] == parameters["mmaas.engine.blake3"]
    assert list(config.dynamic_batching.preferred_batch_size) == [2, 4]
    assert (repository / "other-model").is_dir()
    # the engine runs from its new place (its external data beside it), equal to the source
    x = np.random.default_rng(0).random((1, 3, 64, 96), dtype=np.float32)
    exported = ort.InferenceSession(
        str(model / "1" / "model.onnx"), providers=["CPUExecutionProvider"]
    )
    source = ort.InferenceSession(
        str(ppocr_models["ppocr-det"]), providers=["CPUExecutionProvider"]
    )
    np.testing.assert_allclose(
        exported.run(None, {"x": x})[0], source.run(None, {"x": x})[0], atol=1e-4
    )


def test_bad_input_is_refused_and_nothing_is_written(signed, keys, tmp_path: Path) -> None:
    folder, _ = signed
    spec = yaml.safe_load((folder / "model.yaml").read_text())
    never = tmp_path / "never-built"
    never.mkdir()
    (never / "ch_PP-OCRv4_det_infer.onnx").hardlink_to(folder / "ch_PP-OCRv4_det_infer.onnx")
    spec["image"] = {"repository": "mmaas-test/never-built", "tag": secrets.token_hex(4)}
    (never / "model.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    first = mmaas("export", "kserve", str(never), "-o", str(tmp_path / "a"))
    assert first.returncode == 2 and "was never built" in first.stderr
    for args in (
        ("export", "triton", str(never), "-o", str(tmp_path / "b")),
        ("export", "kserve", str(folder), "-o", str(tmp_path / "c"), "--image", "mmaas/x:1.0.0"),
        ("verify", "127.0.0.1:1/mmaas/x:1.0.0", "--pull"),
    ):
        done = mmaas(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert "Traceback" not in done.stderr
    assert not any((tmp_path / name).exists() for name in "abc")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    done = mmaas("export", "kserve", str(folder), "-o", str(mine))
    assert done.returncode == 2 and "did not export" in done.stderr
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    (tmp_path / "not-a-key.pem").write_text("hello\n")
    done = mmaas("build", str(never), "--sign", str(tmp_path / "not-a-key.pem"))
    assert done.returncode == 2 and "not a PEM private key" in done.stderr
    assert "docker build" not in done.stderr  # refused before any Docker work
