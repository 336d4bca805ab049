"""End to end on a real Docker engine: `mmaas build` of a model whose weights live in an
external data file (``save_as_external_data``, as exporters write models above 2 GiB), then
the container serves one request equal to in-process ONNX Runtime on the source, `mmaas
verify` accepts the image, and an image with an altered engine data file refuses to start."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as grpcclient

from docker_fixtures import (
    image_manifest,
    run_container,
    run_to_exit,
    tampered_image,
    wait_for_grpc_serving,
)
from mmaas.core import proc
from mmaas_cli import run_mmaas
from onnx_builder import external_data_model

pytestmark = [pytest.mark.docker, pytest.mark.slow]
IMAGE = "mmaas-test/external-data:1"
SPEC = (
    'name: external\nversion: "1"\nsource: {path: big.onnx}\nmax_batch_size: 4\n'
    "inputs:\n  - {name: x, min: [1, 64], opt: [2, 64], max: [4, 64]}\n"
    "image: {repository: mmaas-test/external-data, base_image: %s}\n"
)


def mmaas(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    """The real CLI in a subprocess, with its engine cache under ``cache``."""
    return run_mmaas(*args, cache=cache)


@pytest.fixture(scope="module")
def built(
    docker_cli: list[str], base_image: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[dict, Path, Path]]:
    """(`mmaas build --json` output, the source ONNX file, the engine-cache root)."""
    root = tmp_path_factory.mktemp("external-e2e")
    source = external_data_model(root / "external")
    (source.parent / "model.yaml").write_text(SPEC % base_image)
    cache = root / "cache"
    proc.run([*docker_cli, "image", "rm", "--force", IMAGE], check=False)
    result = mmaas("build", str(source.parent), "--json", cache=cache)
    assert result.returncode == 0, result.stderr[-3000:]
    yield json.loads(result.stdout), source, cache
    proc.run([*docker_cli, "image", "rm", "--force", IMAGE], check=False)


def test_image_serves_a_request_like_onnxruntime_on_the_source(
    built: tuple[dict, Path, Path], docker_cli: list[str]
) -> None:
    report, source, _ = built
    assert report["image"] == IMAGE and report["engine"]["path"] == "model.ort.onnx"
    x = np.random.default_rng(5).standard_normal((3, 64)).astype(np.float32)
    expected = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"]).run(
        ["y"], {"x": x}
    )[0]
    with run_container(docker_cli, IMAGE, ports=[8001]) as container:
        wait_for_grpc_serving(container.port, timeout=60, container=container)
        client = grpcclient.InferenceServerClient(url=f"127.0.0.1:{container.port}")
        tensor = grpcclient.InferInput("x", [3, 64], "FP32")
        tensor.set_data_from_numpy(x)
        output = client.infer("external", [tensor]).as_numpy("y")
    np.testing.assert_allclose(output, expected, rtol=1e-5, atol=1e-4)


def test_image_carries_and_verifies_the_engine_data_file(
    built: tuple[dict, Path, Path], docker_cli: list[str]
) -> None:
    _, _, cache = built
    listing = proc.run(
        [*docker_cli, "run", "--rm", "--entrypoint", "ls", IMAGE, "/opt/mmaas/model"]
    ).stdout.split()
    assert sorted(listing) == [
        "image-files.json",  # the seal: every file the image runs, the engine's included
        "manifest.json",
        "model.ort.onnx",
        "model.ort.onnx.data",
        "report.json",
    ]
    (engine,) = image_manifest(docker_cli, IMAGE)["engines"]  # type: ignore[misc]
    manifest = engine["manifest"]
    assert [data["path"] for data in manifest["engine_data"]] == ["model.ort.onnx.data"]
    verified = mmaas("verify", IMAGE, cache=cache)
    assert verified.returncode == 0, verified.stderr


def test_image_with_an_altered_data_file_refuses_to_start(
    built: tuple[dict, Path, Path], docker_cli: list[str]
) -> None:
    _, _, cache = built
    data = "/opt/mmaas/model/model.ort.onnx.data"
    tag = "mmaas-test/external-data:tampered"
    with tampered_image(docker_cli, IMAGE, data, tag) as tampered:
        code, logs = run_to_exit(docker_cli, tampered)
        assert code == 1
        assert "model.ort.onnx.data: engine data does not match its manifest" in logs
        assert "Traceback" not in logs
        result = mmaas("verify", tampered, cache=cache)
        assert result.returncode == 1 and "engine data does not match" in result.stderr
