"""The GPU variant of models/qwen-vl (models/qwen-vl-gpu) built into its image by ``mmaas
build`` from the GPU template on this machine without a GPU: onnxruntime-gpu and the CUDA
wheels in, both engines typed fp16 graphs checked by the builder stage on the CPU provider
(the generation gate's figures in the manifest), the vision engine's CUDA-graph buckets
recorded, no torch or transformers in the image, and the server refusing readiness on a
host without a GPU, saying why (C34)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mmaas.core import proc

from .conftest import built_copy

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def gpu_image(docker_cli: list[str], base_image: str, qwen_vl_gpu_export: Path,
              tmp_path_factory) -> Iterator[str]:  # fmt: skip
    root = tmp_path_factory.mktemp("qwen-vl-gpu-image")
    with built_copy(docker_cli, base_image, qwen_vl_gpu_export, root, "mmaas-test/qwen-vl-gpu") as (
        image,
        _,
    ):
        yield image


def test_the_gpu_image_holds_typed_engines_and_their_gate(gpu_image, docker_cli) -> None:
    manifest = proc.run([*docker_cli, "run", "--rm", "--entrypoint", "cat", gpu_image,
                         "/opt/mmaas/model/manifest.json"]).stdout  # fmt: skip
    engines = {e["name"]: e["manifest"] for e in json.loads(manifest)["engines"]}
    for engine in engines.values():
        assert engine["model"]["precision"] == "fp16"
        assert engine["report"]["compile"]["typed_graph"] == "fp16"
    gate = engines["language"]["report"]["generation"]
    assert gate["passed"] and gate["top1_agreement"] >= 0.9
    shapes = engines["vision"]["report"]["compile"]
    assert shapes["device"] == "gpu"
    probe = ("import importlib.util as u, onnxruntime as o; print(o.get_available_providers(), "
             "[u.find_spec(m) is None for m in ('torch', 'transformers')])")  # fmt: skip
    out = proc.run([*docker_cli, "run", "--rm", "--entrypoint", "python", gpu_image, "-c", probe])
    assert "CUDAExecutionProvider" in out.stdout and "[True, True]" in out.stdout


def test_without_a_gpu_the_server_refuses_readiness_c34(gpu_image, docker_cli) -> None:
    result = proc.run([*docker_cli, "run", "--rm", gpu_image], check=False)
    assert result.returncode == 1
    assert "GPU instance not ready" in result.stderr
