"""models/qwen-vl end to end on a real Docker engine: the small export (seed 0) beside a
copy of the model's real model.yaml, `mmaas build`, the container, and two real pictures
of different sizes through the example client, equal to in-process ONNX Runtime."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from scripts import qwen_vl_client as client

from docker_fixtures import run_container, wait_for_grpc_serving
from mmaas.core import proc

pytestmark = [pytest.mark.docker, pytest.mark.slow]
ROOT = Path(__file__).resolve().parent.parent
IMAGE = "mmaas-test/qwen-vl:1.0.0"


@pytest.fixture(scope="module")
def model_dir(qwen_vl_export: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("qwen-vl")
    spec = (ROOT / "models" / "qwen-vl" / "model.yaml").read_text()
    (folder / "model.yaml").write_text(spec + "image: {repository: mmaas-test/qwen-vl}\n")
    (folder / "qwen2_vl_vision.onnx").symlink_to(qwen_vl_export / "qwen2_vl_vision.onnx")
    return folder


@pytest.fixture(scope="module")
def served(model_dir: Path, docker_cli: list[str], base_image: str):
    built = subprocess.run(
        [str(Path(sys.executable).parent / "mmaas"), "build", str(model_dir), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    assert json.loads(built.stdout)["image"] == IMAGE
    try:
        with run_container(docker_cli, IMAGE, ports=[8001]) as container:
            wait_for_grpc_serving(container.port, timeout=60, container=container)
            yield container
    finally:
        proc.run([*docker_cli, "image", "rm", "--force", IMAGE], check=False)


@pytest.mark.parametrize("size", [(448, 448), (532, 336)], ids=["opt-448x448", "532x336"])
def test_two_real_pictures_equal_in_process_onnxruntime(
    served, model_dir: Path, tmp_path: Path, size: tuple[int, int]
) -> None:
    picture = tmp_path / "picture.png"
    gradient = np.linspace(0, 255, size[0] * size[1] * 3).reshape(size[1], size[0], 3)
    Image.fromarray(gradient.astype(np.uint8)).save(picture)
    pixel_values, grid_thw = client.preprocess(picture)
    remote = client.infer_remote(f"127.0.0.1:{served.port}", "qwen-vl", pixel_values, grid_thw)
    local = client.infer_local(model_dir / "qwen2_vl_vision.onnx", pixel_values, grid_thw)
    assert remote.shape == (pixel_values.shape[0] // 4, local.shape[1])
    np.testing.assert_allclose(remote, local, atol=1e-5, rtol=1e-5)
