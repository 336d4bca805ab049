"""A back end that cannot carry a tensor's datatype refuses it at validation, naming the
tensor: TensorRT has no BF16 I/O before TensorRT 10 and no BYTES or FP64
tensors at all; ONNX Runtime carries all of them."""

from __future__ import annotations

from pathlib import Path

import pytest
from onnx import TensorProto

from mmaas.build.spec_checks import host_checks
from mmaas.core.errors import SpecError
from mmaas.spec.load import load_spec
from onnx_builder import bf16_model, make_onnx

SPEC = 'name: m\nversion: "1"\nsource: {{path: model.onnx}}\n{backend}max_batch_size: 4\n'
PROFILE = "inputs:\n  - {name: x, min: [1, 4], opt: [2, 4], max: [4, 4]}\n"


def folder(tmp_path: Path, backend: str) -> Path:
    bf16_model(tmp_path / "model.onnx")
    (tmp_path / "model.yaml").write_text(SPEC.format(backend=backend) + PROFILE)
    return tmp_path


def test_tensorrt_8_refuses_bf16_naming_each_tensor(tmp_path: Path) -> None:
    trt8 = "backend: tensorrt\nbuild: {tensorrt: {version: '8.6'}}\n"
    with pytest.raises(SpecError) as caught:
        load_spec(folder(tmp_path, trt8), checks=host_checks())
    problems = "\n".join(str(problem) for problem in caught.value.problems)
    assert len(caught.value.problems) == 2, problems  # input x and output y; z is FP32
    assert (
        "inputs[0].name: input 'x': TensorRT 8.6 (build.tensorrt.version) has no BF16" in problems
    )
    assert "outputs: output 'y': TensorRT 8.6" in problems


def test_bf16_loads_for_tensorrt_10_and_onnxruntime(tmp_path: Path) -> None:
    assert (
        load_spec(folder(tmp_path / "a", "backend: tensorrt\n"), checks=host_checks())
        .spec.inputs[0]
        .datatype
        == "BF16"
    )
    assert (
        load_spec(folder(tmp_path / "b", ""), checks=host_checks()).spec.outputs[0].datatype
        == "BF16"
    )


def test_tensorrt_refuses_bytes_and_fp64_tensors(tmp_path: Path) -> None:
    make_onnx(
        tmp_path / "model.onnx", [("text", TensorProto.STRING, [2]), ("d", TensorProto.DOUBLE, [2])]
    )
    (tmp_path / "model.yaml").write_text(
        SPEC.format(backend="backend: tensorrt\n").replace("max_batch_size: 4", "max_batch_size: 0")
    )
    with pytest.raises(SpecError) as caught:
        load_spec(tmp_path, checks=host_checks())
    text = "\n".join(str(problem) for problem in caught.value.problems)
    assert "input 'text': TensorRT has no BYTES tensors" in text
    assert "input 'd': TensorRT has no FP64 tensors" in text
