"""End to end on a real Docker engine and registry: `mmaas build --sign` -> signature,
SBOM and labels in the image -> `mmaas verify --key` -> the server with trusted keys ->
the exported pod settings running the image -> a Triton model repository -> push, remove,
pull by digest and verify; a tampered pushed image and bad input refused. One signed image
per module (a copy of models/ppocr-det: the engine comes from the engine cache when another
test compiled it)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import yaml
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as triton

from docker_fixtures import run_to_exit, tampered_image, wait_for_grpc_serving
from export_models import model_copy, openssl_key
from mmaas.core import proc
from mmaas.core.hashing import file_digests
from mmaas.core.sbom import missing
from mmaas_cli import run_mmaas
from paths import ROOT
from registry_fixtures import LocalRegistry

pytestmark = [pytest.mark.docker, pytest.mark.slow]
MODEL_DIR = "/opt/mmaas/model"
SETTINGS = {
    "runtime": {"dynamic_batching": {"preferred_batch_size": [2, 4]}, "shutdown_grace_seconds": 3},
    "deploy": {"pre_stop_seconds": 2},
}


def mmaas(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real CLI in a subprocess."""
    return run_mmaas(*args, cwd=ROOT, env=env)


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("keys")
    private, public = openssl_key(folder, "ci")
    _, other = openssl_key(folder, "other")
    return {"private": private, "public": public, "other": other}


@pytest.fixture(scope="module")
def signed(docker_cli, base_image, ppocr_models, keys, tmp_path_factory):
    """``(model folder, image tag)`` of a signed build of a ppocr-det copy; removed after."""
    folder = model_copy(tmp_path_factory.mktemp("det"), ppocr_models["ppocr-det"], SETTINGS)
    tag = f"mmaas-test/deploy-det:{secrets.token_hex(4)}"
    spec = yaml.safe_load((folder / "model.yaml").read_text())
    spec["image"] = {"repository": tag.split(":")[0], "tag": tag.split(":")[1]}
    (folder / "model.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    built = mmaas("build", str(folder), "--sign", str(keys["private"]), "--json")
    assert built.returncode == 0, built.stderr[-3000:]
    assert json.loads(built.stdout)["signature"]["key_id"].startswith("ed25519:")
    assert str(keys["private"].read_text().splitlines()[1]) not in built.stderr + built.stdout
    yield folder, tag
    proc.run([*docker_cli, "image", "rm", "--force", tag], check=False)


@contextmanager
def derived(docker_cli: list[str], image: str, tag: str, step: str) -> Iterator[str]:
    """``tag``: ``image`` with one root ``RUN step``; removed afterwards."""
    dockerfile = f"FROM {image}\nUSER root\nRUN {step}\nUSER 10001\n"
    proc.run(
        [*docker_cli, "build", "--quiet", "--tag", tag, "-"],
        input_bytes=dockerfile.encode(),
        env={"DOCKER_BUILDKIT": "1"},
    )
    try:
        yield tag
    finally:
        proc.run([*docker_cli, "image", "rm", "--force", tag], check=False)


def in_image(docker_cli: list[str], image: str, code: str) -> str:
    argv = [*docker_cli, "run", "--rm", "--entrypoint", "python", image, "-c", code]
    return proc.run(argv).stdout


def test_signed_image_verifies_with_its_key_only(signed, keys) -> None:
    _, image = signed
    ok = mmaas("verify", image, "--key", str(keys["public"]), "--json")
    assert ok.returncode == 0, ok.stderr
    report = json.loads(ok.stdout)
    assert report["trusted_key"] == report["signed_by"]
    # the provenance record, inside the signed manifest
    provenance = report["provenance"]
    folder, _ = signed
    onnx = next(folder.glob("*.onnx"))
    source = provenance["engines"]["model"]["source"]
    assert source["blake3"] == file_digests(onnx)["blake3"] and source["path"] == onnx.name
    assert provenance["engines"]["model"]["command"]  # ONNX Runtime's options, as run
    builder = provenance["builder_images"]["model"]
    assert builder["reference"] == "mmaas/base:bookworm"
    assert builder["content"].startswith("sha256:")
    assert provenance["git"] is None and provenance["workflow_run"] is None  # a temp copy
    refused = mmaas("verify", image, "--key", str(keys["other"]))
    assert refused.returncode == 1 and "which is not trusted" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_sbom_lists_every_shipped_distribution_and_validates(signed, docker_cli) -> None:
    """The SBOM at the labelled path validates against CycloneDX 1.6 and lists every
    distribution the server's interpreter can import, with its exact version (C33)."""
    _, image = signed
    labels = json.loads(proc.run([*docker_cli, "image", "inspect", image]).stdout)[0]["Config"][
        "Labels"
    ]
    text = in_image(docker_cli, image, f"print(open({labels['io.mmaas.sbom']!r}).read())")
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    shipped = json.loads(
        in_image(
            docker_cli,
            image,
            "import json; from mmaas.core.sbom import installed; print(json.dumps(installed()))",
        )
    )
    assert {"onnxruntime", "numpy", "grpcio", "cryptography", "mmaas"} <= set(shipped)
    sbom = json.loads(text)
    assert missing(sbom, shipped) == []
    scope = {p["name"] for p in sbom["metadata"]["properties"]}
    assert "mmaas:sbom:out-of-scope" in scope
    assert "cyclonedx" not in " ".join(shipped)  # the generator never reaches the image


def test_server_refuses_untrusted_and_unsigned_engines(signed, docker_cli, keys) -> None:
    _, image = signed
    untrusted = {"MMAAS_TRUSTED_KEYS": keys["other"].read_text()}
    code, logs = run_to_exit(docker_cli, image, env=untrusted)
    assert code == 1
    assert "which is not trusted" in logs
    unsigned = f"{image}-unsigned"
    with derived(docker_cli, image, unsigned, f"rm {MODEL_DIR}/manifest.sig.json") as tag:
        env = {"MMAAS_TRUSTED_KEYS": keys["public"].read_text()}
        code, logs = run_to_exit(docker_cli, tag, env=env)
        assert code == 1
        assert "unsigned" in logs and "Traceback" not in logs


def test_exported_pod_settings_run_the_image(signed, docker_cli, keys, tmp_path: Path) -> None:
    """The Deployment's container settings, applied by Docker as a kubelet would: its env
    (trusted key, engine pin, threads), user 10001, a read-only root file system with
    /tmp writable, no capabilities, no privilege escalation. The server comes up SERVING
    on gRPC and live on HTTP, and SIGTERM ends it (exit 0) well within the grace period."""
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
        live = container["livenessProbe"]["httpGet"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port(live['port'])}{live['path']}") as r:
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


def test_push_remove_pull_by_digest_verify_and_a_tampered_push_is_refused(
    signed, docker_cli, keys, local_registry: LocalRegistry, tmp_path: Path
) -> None:
    """Runs last: it removes the module's image and gets it back by digest."""
    folder, image = signed
    env = {
        **os.environ,
        "MMAAS_REGISTRY_USER": local_registry.user,
        "MMAAS_REGISTRY_PASSWORD": local_registry.password,
    }
    pushed = mmaas(
        "push", str(folder), "--registry", f"{local_registry.host}/ci", "--json", env=env
    )
    assert pushed.returncode == 0, pushed.stderr
    reference = json.loads(pushed.stdout)["reference"]
    repository = reference.split("@")[0]
    tags = json.loads(pushed.stdout)["tags"]
    proc.run([*docker_cli, "image", "rm", "--force", image, *(f"{repository}:{t}" for t in tags)])
    assert proc.run([*docker_cli, "image", "inspect", reference], check=False).returncode != 0
    done = mmaas("verify", reference, "--pull", "--key", str(keys["public"]), "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["trusted_key"]
    exported = mmaas(
        "export", "kserve", str(folder), "-o", str(tmp_path / "k"), "--image", reference
    )
    assert exported.returncode == 0, exported.stderr
    runtime = yaml.safe_load((tmp_path / "k" / "servingruntime.yaml").read_text())
    assert runtime["spec"]["containers"][0]["image"] == reference
    engine = f"{MODEL_DIR}/model.ort.onnx"
    proc.run([*docker_cli, "tag", reference, f"{repository}:pulled"])
    with tampered_image(
        docker_cli, f"{repository}:pulled", engine, f"{repository}:tampered"
    ) as tampered:
        config = tmp_path / "docker-config"
        local_registry.docker_login(docker_cli, config)
        out = proc.run([*docker_cli, "--config", str(config), "push", tampered]).stdout
        digest = out.split("digest: ")[1].split()[0]
    bad = f"{repository}@{digest}"
    done = mmaas("verify", bad, "--pull", "--key", str(keys["public"]), env=env)
    assert done.returncode == 1 and "does not match its manifest" in done.stderr
    proc.run(
        [*docker_cli, "image", "rm", "--force", bad, reference, f"{repository}:pulled"], check=False
    )
