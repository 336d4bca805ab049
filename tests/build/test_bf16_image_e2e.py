"""BF16 end to end on a real Docker engine: a model with a BF16 input
and a BF16 and an FP32 output (onnx_builder.bf16_model) and a control input with sample
values builds through `mmaas build` (the builder stage's profile check and accuracy gate
run bfloat16 samples), its container warms up and answers tritonclient: BF16 in raw
contents, outputs labelled BF16 that tritonclient decodes, ModelMetadata saying BF16, and
no ONNX Runtime console lines in the container log."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import onnx
import pytest
import tritonclient.grpc as grpcclient
from onnx import TensorProto, helper

from docker_fixtures import run_container, wait_for_grpc_serving
from mmaas.core import proc
from onnx_builder import onnx_model, value_info

pytestmark = [pytest.mark.docker, pytest.mark.slow]
SPEC = """\
name: bf16
version: "1"
source: {{path: bf16.onnx}}
max_batch_size: 4
inputs:
  - {{name: x, min: [1, 4], opt: [2, 4], max: [4, 4]}}
  - {{name: scale, min: [1, 1], opt: [2, 1], max: [4, 1], sample_values: [1, 2]}}
checks:
  accuracy: {{atol: 0.0}}
image: {{repository: mmaas-test/bf16, tag: "{tag}"}}
"""


def scaled_bf16_model(path: Path) -> Path:
    """x BF16 [N, 4] and scale INT64 [N, 1] -> y BF16 = x * x * scale, z FP32 = x (the
    arithmetic in FP32: ONNX Runtime's CPU kernels have no BF16 Mul); ``scale`` is the
    integer input whose sample values the profile check and the warm-up use."""
    bf16, fp32 = TensorProto.BFLOAT16, TensorProto.FLOAT
    nodes = [
        helper.make_node("Cast", ["x"], ["z"], to=fp32),
        helper.make_node("Mul", ["z", "z"], ["square"]),
        helper.make_node("Cast", ["scale"], ["scale_fp32"], to=fp32),
        helper.make_node("Mul", ["square", "scale_fp32"], ["scaled"]),
        helper.make_node("Cast", ["scaled"], ["y"], to=bf16),
    ]
    model = onnx_model(
        nodes,
        [value_info("x", bf16, ["N", 4]), value_info("scale", TensorProto.INT64, ["N", 1])],
        [value_info("y", bf16, ["N", 4]), value_info("z", fp32, ["N", 4])],
    )
    onnx.save(model, str(path))
    return path


@pytest.fixture(scope="module")
def image(docker_cli: list[str], base_image: str, tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("bf16")
    scaled_bf16_model(folder / "bf16.onnx")
    tag = uuid.uuid4().hex[:12]
    (folder / "model.yaml").write_text(SPEC.format(tag=tag))
    mmaas = str(Path(sys.executable).parent / "mmaas")
    done = subprocess.run(
        [mmaas, "build", str(folder), "--json"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    name = f"mmaas-test/bf16:{tag}"
    assert json.loads(done.stdout)["image"] == name
    yield name
    proc.run([*docker_cli, "image", "rm", "--force", name], check=False)


def test_bf16_image_answers_tritonclient_with_bf16(image: str, docker_cli: list[str]) -> None:
    with run_container(docker_cli, image, ports=[8001]) as container:
        wait_for_grpc_serving(container.port, timeout=60, container=container)
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{container.port}")
        metadata = client.get_model_metadata("bf16")
        assert [t.datatype for t in metadata.inputs] == ["BF16", "INT64"]
        assert [t.datatype for t in metadata.outputs] == ["BF16", "FP32"]
        x = np.array([[1.5, -2.0, 3.0, 0.25], [8.0, 0.5, -1.0, 2.0]], np.float32)
        inputs = [
            grpcclient.InferInput("x", [2, 4], "BF16"),
            grpcclient.InferInput("scale", [2, 1], "INT64"),
        ]
        inputs[0].set_data_from_numpy(x)  # tritonclient sends float32 as bfloat16 words
        inputs[1].set_data_from_numpy(np.array([[1], [2]], np.int64))
        result = client.infer("bf16", inputs)
        assert result.get_output("y").datatype == "BF16"
        np.testing.assert_array_equal(result.as_numpy("y"), x * x * np.array([[1], [2]]))
        np.testing.assert_array_equal(result.as_numpy("z"), x)
        log = container.logs()
    assert "\x1b[" not in log and ":onnxruntime:" not in log, log
