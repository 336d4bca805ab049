"""The GPU runtime image, built here (no GPU is needed to build): ``mmaas build`` of the GPU
variant of ppocr-det installs onnxruntime-gpu and the pinned CUDA/cuDNN wheels on the
configured base image, runs as user 10001, carries the version labels, finds the wheels'
libraries, and its server refuses to become ready on a host without a GPU, saying why
(C34). Prints the image size and the build time (docs/gpu.md records them).

Slow and large: the CUDA wheels are about 1 GB (pip's cache mount keeps them for rebuilds).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from scripts.gpu_models import write_gpu_model

from mmaas.core import proc
from paths import ROOT

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def gpu_image(docker_cli: list[str], base_image: str, ppocr_models, tmp_path_factory):
    folder = write_gpu_model(ROOT / "models/ppocr-det", tmp_path_factory.mktemp("g") / "ppocr-det")
    tag = f"mmaas-test/ppocr-det-gpu:{uuid.uuid4().hex[:10]}"
    text = (
        folder / "model.yaml"
    ).read_text() + f"image: {{repository: {tag.split(':')[0]}, tag: {tag.split(':')[1]}}}\n"
    (folder / "model.yaml").write_text(text)
    started = time.perf_counter()
    result = subprocess.run(
        [str(Path(sys.executable).parent / "mmaas"), "build", str(folder), "--json"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    seconds = time.perf_counter() - started
    assert result.returncode == 0, result.stderr[-4000:]
    inspected = json.loads(proc.run([*docker_cli, "image", "inspect", tag]).stdout)[0]
    print(f"\nGPU image {tag}: {inspected['Size'] / 1e9:.2f} GB, built in {seconds:.0f} s")
    yield tag, inspected
    proc.run([*docker_cli, "image", "rm", "--force", tag], check=False)


def test_gpu_image_is_labelled_non_root_and_finds_the_cuda_libraries(
    gpu_image, docker_cli: list[str]
) -> None:
    tag, inspected = gpu_image
    labels = inspected["Config"]["Labels"]
    assert labels["io.mmaas.onnxruntime.version"] == "1.31.1"
    assert labels["io.mmaas.cuda.version"].startswith("13.0")
    assert labels["io.mmaas.cudnn.version"].startswith("9.19")
    assert inspected["Config"]["User"] == "10001"
    probe = (
        "import ctypes, onnxruntime as o; print(o.__version__, o.get_available_providers());"
        "[ctypes.CDLL(n) for n in ('libcudart.so.13', 'libcublasLt.so.13', 'libcudnn.so.9')];"
        "print('libraries load')"
    )
    result = proc.run(
        [*docker_cli, "run", "--rm", "--entrypoint", "python", tag, "-c", probe], check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "CUDAExecutionProvider" in result.stdout and "libraries load" in result.stdout


def test_gpu_image_without_a_gpu_refuses_readiness_with_the_reason_c34(
    gpu_image, docker_cli: list[str]
) -> None:
    tag, _ = gpu_image
    result = proc.run([*docker_cli, "run", "--rm", tag], check=False)
    assert result.returncode == 1
    assert "GPU instance not ready" in result.stderr
    assert "CUDAExecutionProvider" in result.stderr
