"""A pipeline kind's request check follows its engine wherever it is served: the qwen-vl
vision export made a model of its own (the single-engine GPU variant of
scripts/gpu_models.py, served here on the CPU provider with ``allow_cpu_fallback``) refuses
a ``grid_thw`` that does not describe its patches, as ``qwen-vl-vision`` does inside the
pipeline's model; and its ModelConfig tells where its instances really run (the CPU
provider here: KIND_CPU, no GPUs)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as triton
from scripts.gpu_models import write_gpu_model
from tritonclient.utils import InferenceServerException

from mmaas.build.local import compile_local

from .conftest import RunningServer


@pytest.fixture(scope="module")
def vision(
    qwen_vl_export: Path,
    module_server: Callable[..., RunningServer],
    tmp_path_factory: pytest.TempPathFactory,
) -> RunningServer:
    folder = tmp_path_factory.mktemp("vision") / "qwen-vl"
    write_gpu_model(qwen_vl_export, folder, extra_build=", allow_cpu_fallback: true")
    _, model_dir = compile_local(folder)
    return module_server(model_dir)


def inputs(grid: list[list[int]], patches: int = 1024) -> list[triton.InferInput]:
    pixels = triton.InferInput("pixel_values", [patches, 1176], "FP32")
    pixels.set_data_from_numpy(np.zeros((patches, 1176), np.float32))
    thw = triton.InferInput("grid_thw", [len(grid), 3], "INT64")
    thw.set_data_from_numpy(np.array(grid, np.int64))
    return [pixels, thw]


def test_the_vision_model_alone_refuses_a_grid_that_does_not_describe_its_patches(
    vision: RunningServer,
) -> None:
    client = vision.client()
    embeds = client.infer("qwen-vl", inputs([[1, 32, 32]])).as_numpy("image_embeds")
    assert embeds.shape[0] == 1024 // 4
    with pytest.raises(InferenceServerException) as info:
        client.infer("qwen-vl", inputs([[2, 4, 3]]))
    assert info.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert "input 'grid_thw': row 0 is [2, 4, 3]" in info.value.message()
    with pytest.raises(InferenceServerException) as info:
        client.infer("qwen-vl", inputs([[1, 16, 16]]))
    assert "[[1, 16, 16]] describes 256 patches" in info.value.message()
    assert client.is_model_ready("qwen-vl")


def test_the_config_reports_where_the_instances_run(vision: RunningServer) -> None:
    config = vision.client().get_model_config("qwen-vl").config
    (group,) = config.instance_group
    assert group.kind == group.KIND_CPU and list(group.gpus) == []  # the CPU fallback's truth
