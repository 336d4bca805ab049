"""fp16 autocast for strongly typed TensorRT 11 builds, checked against the fp32 graph in
ONNX Runtime, on the real PP-OCR models; and Q/DQ detection."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from mmaas.backends.tensorrt.builder.precision import convert_fp16, has_qdq
from mmaas.core.errors import BuildError
from mmaas.core.manifest import ModelInfo, TensorInfo


def ppocr(name: str, low: tuple, mid: tuple, output: str) -> ModelInfo:
    shape = (-1, 3, -1, -1)
    return ModelInfo(
        name,
        "1",
        "tensorrt",
        "fp16",
        0,
        (TensorInfo("x", "FP32", shape, low, mid, mid),),
        (TensorInfo(output, "FP32", (-1, -1)),),
    )


def test_cls_converts_within_tolerance_and_keeps_fp32_io(ppocr_models, tmp_path: Path) -> None:
    model = ppocr("cls", (1, 3, 48, 192), (4, 3, 48, 192), "save_infer_model/scale_0.tmp_1")
    target = tmp_path / "cls.fp16.onnx"
    report = convert_fp16(ppocr_models["ppocr-cls"], target, model, atol=0.02, rtol=0.02)
    assert set(report["max_abs_diff"]) == {"min", "opt"}
    assert 0 < max(report["max_abs_diff"].values()) < 0.02
    graph = onnx.load(str(target)).graph
    assert graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT
    assert graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT
    assert any(n.op_type == "Cast" for n in graph.node)


def test_det_naive_fp16_is_refused_not_built(ppocr_models, tmp_path: Path) -> None:
    """PP-OCRv4 det holds constants beyond fp16's range: the autocast graph is wrong."""
    model = ppocr("det", (1, 3, 32, 32), (1, 3, 64, 64), "sigmoid_0.tmp_0")
    with pytest.raises(BuildError) as caught:
        convert_fp16(ppocr_models["ppocr-det"], tmp_path / "d.onnx", model, atol=0.02, rtol=0.02)
    text = str(caught.value)
    assert "fp16 conversion changes output 'sigmoid_0.tmp_0' by up to" in text
    assert "by up to 1 at the opt shapes" in text and "ModelOpt AutoCast" in text


def test_qdq_detection(ppocr_models, tmp_path: Path) -> None:
    assert not has_qdq(ppocr_models["ppocr-cls"])
    scale = helper.make_tensor("s", TensorProto.FLOAT, [], [0.1])
    zero = helper.make_tensor("z", TensorProto.INT8, [], [0])
    graph = helper.make_graph(
        [
            helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
            helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"]),
        ],
        "qdq",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [scale, zero],
    )
    path = tmp_path / "qdq.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    assert has_qdq(path)
