"""End to end: `mmaas build models/ppocr-det` -> container -> tritonclient, on a real Docker
engine. The image is built once per module through the real CLI (its output is no terminal,
as in CI: plain progress lines on stderr, the JSON alone on stdout); an unchanged rebuild
runs no Docker build and prints the summary table."""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from scripts import demo_request as demo
from tritonclient.utils import InferenceServerException

from docker_fixtures import (
    image_manifest,
    run_container,
    run_to_exit,
    tampered_image,
    wait_for_grpc_serving,
)
from mmaas.core import proc
from mmaas_cli import run_mmaas
from paths import ROOT

pytestmark = [pytest.mark.docker, pytest.mark.slow]
IMAGE = "mmaas/ppocr-det:1.0.0"
LOG = ROOT / "models" / "ppocr-det" / ".mmaas" / "build.log"
BUILDKIT_LINE = re.compile(r"^#\d+ ", re.MULTILINE)


def mmaas(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the real CLI (the console script installed beside this Python) in a subprocess."""
    return run_mmaas(*args, cwd=ROOT)


@pytest.fixture(scope="module")
def build_run(
    docker_cli: list[str], base_image: str, ppocr_models: dict[str, Path]
) -> tuple[subprocess.CompletedProcess[str], str]:
    """`mmaas build models/ppocr-det --json` (the image removed first) and its log."""
    proc.run([*docker_cli, "image", "rm", "--force", IMAGE], check=False)
    result = mmaas("build", "models/ppocr-det", "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    return result, LOG.read_text()


@pytest.fixture(scope="module")
def built(build_run: tuple[subprocess.CompletedProcess[str], str]) -> dict:
    """The ppocr-det image's build result (the JSON `mmaas build --json` printed)."""
    return dict(json.loads(build_run[0].stdout))


@pytest.fixture(scope="module")
def server(built: dict, docker_cli: list[str]):
    """A running container of the image, SERVING on a loopback port."""
    with run_container(docker_cli, IMAGE, ports=[8001, 8000]) as container:
        wait_for_grpc_serving(container.port, timeout=60, container=container)
        yield container


@pytest.fixture(scope="module")
def reference(ppocr_models: dict[str, Path]) -> ort.InferenceSession:
    return ort.InferenceSession(str(ppocr_models["ppocr-det"]), providers=["CPUExecutionProvider"])


def test_build_reports_image_engine_and_labels(built: dict, docker_cli: list[str]) -> None:
    assert built["image"] == IMAGE
    assert built["engine"]["path"] == "model.ort.onnx"
    inspected = json.loads(proc.run([*docker_cli, "image", "inspect", IMAGE]).stdout)[0]
    labels = inspected["Config"]["Labels"]
    assert labels["io.mmaas.engine.blake3"] == built["engine"]["blake3"]
    (engine,) = image_manifest(docker_cli, IMAGE)["engines"]  # type: ignore[misc]
    data = engine["manifest"]["engine_data"]
    assert labels["io.mmaas.engine-data.blake3"] == ",".join(f["blake3"] for f in data)
    assert labels["io.mmaas.model.name"] == "ppocr-det"
    assert labels["org.opencontainers.image.version"] == "1.0.0"
    assert inspected["Config"]["User"] == "10001"


def test_the_image_healthcheck_asks_grpc_health(server, docker_cli: list[str]) -> None:
    inspected = json.loads(proc.run([*docker_cli, "image", "inspect", IMAGE]).stdout)[0]
    assert inspected["Config"]["Healthcheck"]["Test"] == [
        "CMD",
        "python",
        "-m",
        "mmaas.server.probe",
    ]
    probe = proc.run([*docker_cli, "exec", server.id, "python", "-m", "mmaas.server.probe"])
    assert "127.0.0.1:8001: SERVING" in probe.stderr
    deadline = time.monotonic() + 60
    while (health := server.state()["Health"]["Status"]) != "healthy":  # type: ignore[index]
        assert health == "starting" and time.monotonic() < deadline, server.state()
        time.sleep(1)


def test_the_image_serves_http_on_8000_like_grpc(server, reference) -> None:
    """The README's `docker run -p 8000:8000 ...` + curl/tritonclient.http path."""
    http_url = f"127.0.0.1:{server.ports[8000]}"
    with urllib.request.urlopen(f"http://{http_url}/v2/health/ready", timeout=10) as reply:
        assert json.loads(reply.read()) == {"ready": True}
    array = demo.det_input(demo.render_text_image(320, 320))
    tensor = httpclient.InferInput("x", list(array.shape), "FP32")
    tensor.set_data_from_numpy(array)
    result = httpclient.InferenceServerClient(http_url).infer("ppocr-det", [tensor])
    over_grpc, _ = demo.infer(f"127.0.0.1:{server.port}", "ppocr-det", array)
    np.testing.assert_array_equal(result.as_numpy("sigmoid_0.tmp_0"), over_grpc)


@pytest.mark.parametrize("size", ["640x640", "320x480"])
def test_real_image_equals_in_process_onnxruntime(server, reference, size: str) -> None:
    width, height = (int(v) for v in size.split("x"))
    array = demo.det_input(demo.render_text_image(width, height))
    output, _ = demo.infer(f"127.0.0.1:{server.port}", "ppocr-det", array)
    expected = reference.run(None, {"x": array})[0]
    assert output.shape == (1, 1, height, width)
    np.testing.assert_allclose(output, expected, atol=1e-4, rtol=0)
    assert (output > 0.3).sum() > 1000  # the rendered text is detected


def test_tensor_outside_the_profile_is_invalid_argument(server) -> None:
    client = grpcclient.InferenceServerClient(url=f"127.0.0.1:{server.port}")
    tensor = grpcclient.InferInput("x", [1, 3, 16, 16], "FP32")
    tensor.set_data_from_numpy(np.zeros((1, 3, 16, 16), np.float32))
    with pytest.raises(InferenceServerException) as raised:
        client.infer("ppocr-det", [tensor])
    assert raised.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert "32" in raised.value.message()  # names the allowed range


def test_verify_accepts_the_image(built: dict) -> None:
    result = mmaas("verify", IMAGE, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["engine"]["blake3"] == built["engine"]["blake3"]


def test_tampered_engine_image_refuses_to_start(built: dict, docker_cli: list[str]) -> None:
    """A derived image that appends one byte to the engine: the container exits non-zero
    with a clear line before serving, and `mmaas verify` fails."""
    engine = "/opt/mmaas/model/model.ort.onnx"
    with tampered_image(docker_cli, IMAGE, engine, "mmaas-test/ppocr-det:tampered") as tampered:
        code, logs = run_to_exit(docker_cli, tampered)
        assert code == 1
        assert "does not match its manifest" in logs
        assert "Traceback" not in logs
        result = mmaas("verify", tampered)
        assert result.returncode == 1
        assert f"{tampered}:{engine}: engine does not match its manifest" in result.stderr
        assert "mmaas-verify-" not in result.stderr  # not the host's scratch copy


def test_runtime_image_lacks_the_build_side(built: dict, docker_cli: list[str]) -> None:
    """The runtime image installs mmaas as a wheel of the server and the back end's runtime
    part only: no CLI, spec, build or stage code, no Jinja2/pydantic/YAML/rich/onnx, no pip;
    the server and the runtime part import. (click is there: Granian, the HTTP front end's
    server, requires it.)"""

    def python(code: str) -> subprocess.CompletedProcess[str]:
        argv = [*docker_cli, "run", "--rm", "--entrypoint", "python", IMAGE, "-c", code]
        return proc.run(argv, check=False)

    for module in ("mmaas.cli", "mmaas.spec", "mmaas.build", "mmaas.stage", "rich", "jinja2",
                   "pydantic", "yaml", "onnx", "pip", "tritonclient"):  # fmt: skip
        done = python(f"import {module}")
        assert done.returncode != 0, f"the runtime image has {module}"
        assert "ModuleNotFoundError" in done.stderr, done.stderr
    done = python("import mmaas.server.app, mmaas.backends.onnxruntime.runtime; print('ok')")
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_build_progress_is_plain_lines_and_the_raw_output_is_in_the_log(
    build_run: tuple[subprocess.CompletedProcess[str], str], built: dict
) -> None:
    done, log = build_run
    lines = done.stderr.splitlines()
    relative = LOG.relative_to(ROOT)  # as MODEL was given: models/ppocr-det
    assert lines[0] == f"mmaas: build log: {relative}" and built["log"] == str(relative)
    assert f"▸ check {IMAGE}" in lines and f"▸ package {IMAGE}" in lines
    finished = [line.split()[1] for line in lines if line.startswith("✓ ")]
    assert finished[-2:] == ["package", "verify"], done.stderr
    assert not BUILDKIT_LINE.search(done.stderr), done.stderr  # only with --verbose
    assert "\x1b[" not in done.stderr  # no terminal: no colour, no spinner
    assert BUILDKIT_LINE.search(log)  # every raw line is in the log


def test_an_unchanged_cli_rebuild_is_current_and_prints_the_summary(built: dict) -> None:
    again = mmaas("build", "models/ppocr-det")
    assert again.returncode == 0, again.stderr
    assert "up to date (build digest sha256:" in again.stderr
    assert not BUILDKIT_LINE.search(again.stderr)
    table = again.stdout
    assert f"mmaas build {IMAGE}" in table.splitlines()[0]
    assert f"model.ort.onnx  {built['engine']['blake3']}" in table
    assert "up to date (the image was built from the same inputs: no Docker build)" in table
    assert all(f"profile {point}" in table for point in ("min", "opt", "max"))
    quiet = mmaas("build", "models/ppocr-det", "--quiet", "--rebuild")
    assert quiet.returncode == 0, quiet.stderr
    assert (quiet.stdout, quiet.stderr) == (f"{IMAGE}\n", "")
