"""ONNX signature reading: the three real PP-OCR models and odd graphs built here (C1, C4)."""

from __future__ import annotations

from pathlib import Path

import pytest
from onnx import TensorProto

from mmaas.core.errors import SourceError
from mmaas.spec.onnx_graph import GraphTensor, read_signature
from onnx_builder import FLOAT, make_onnx


def test_ppocr_det(ppocr_models: dict[str, Path]) -> None:
    graph = read_signature(ppocr_models["ppocr-det"])
    assert graph.inputs == (
        GraphTensor(
            "x",
            "FP32",
            (-1, 3, -1, -1),
            ("p2o.DynamicDimension.0", "", "p2o.DynamicDimension.1", "p2o.DynamicDimension.2"),
        ),
    )
    [output] = graph.outputs
    assert (output.name, output.datatype, output.shape) == (
        "sigmoid_0.tmp_0",
        "FP32",
        (-1, 1, -1, -1),
    )
    assert graph.inputs[0].dynamic_axes == (0, 2, 3)


def test_ppocr_rec_question_mark_dim_is_dynamic(ppocr_models: dict[str, Path]) -> None:
    graph = read_signature(ppocr_models["ppocr-rec"])
    assert graph.inputs[0].shape == (-1, 3, -1, -1)
    assert graph.inputs[0].dim_names[2] == "?"
    assert (graph.outputs[0].name, graph.outputs[0].shape) == ("softmax_11.tmp_0", (-1, -1, 6625))


def test_ppocr_cls_minus_one_and_slash_name(ppocr_models: dict[str, Path]) -> None:
    graph = read_signature(ppocr_models["ppocr-cls"])
    assert graph.inputs[0].shape == (-1, 3, -1, -1)
    assert graph.inputs[0].dim_names == ("", "", "?", "?")
    assert graph.output("save_infer_model/scale_0.tmp_1") == GraphTensor(
        "save_infer_model/scale_0.tmp_1", "FP32", (-1, 2), ("", "")
    )


def test_odd_names_are_kept_exactly_c1(tmp_path: Path) -> None:
    names = ["onnx::Conv_1", "input:0", "a.b/c", "with space", "it's,odd"]
    path = make_onnx(tmp_path / "m.onnx", [(name, FLOAT, [1, 2]) for name in names])
    graph = read_signature(path)
    assert [tensor.name for tensor in graph.inputs] == names
    assert graph.input("input:0") is not None and graph.input("input") is None


def test_every_dynamic_dim_form_is_minus_one_c4(tmp_path: Path) -> None:
    dims = ["batch _size", -1, 0, None, "?", 7, "N"]
    graph = read_signature(make_onnx(tmp_path / "m.onnx", [("x", FLOAT, dims)]))
    tensor = graph.inputs[0]
    assert tensor.shape == (-1, -1, -1, -1, -1, 7, -1)
    assert tensor.dim_names == ("batch _size", "", "", "", "?", "", "N")
    assert tensor.dynamic_axes == (0, 1, 2, 3, 4, 6)


def test_scalar_and_shapeless_tensors(tmp_path: Path) -> None:
    path = make_onnx(tmp_path / "m.onnx", [("scale", FLOAT, []), ("any", FLOAT, None)])
    graph = read_signature(path)
    assert graph.input("scale") == GraphTensor("scale", "FP32", (), ())
    assert graph.input("any") == GraphTensor("any", "FP32", None, ())


def test_initializers_listed_as_inputs_are_left_out(tmp_path: Path) -> None:
    path = make_onnx(tmp_path / "m.onnx", [("x", FLOAT, [1])], weights_as_inputs=["w", "b"])
    assert [tensor.name for tensor in read_signature(path).inputs] == ["x"]


@pytest.mark.parametrize(
    ("elem_type", "datatype"),
    [
        (TensorProto.FLOAT, "FP32"),
        (TensorProto.FLOAT16, "FP16"),
        (TensorProto.BFLOAT16, "BF16"),
        (TensorProto.DOUBLE, "FP64"),
        (TensorProto.INT64, "INT64"),
        (TensorProto.INT32, "INT32"),
        (TensorProto.INT8, "INT8"),
        (TensorProto.UINT8, "UINT8"),
        (TensorProto.BOOL, "BOOL"),
        (TensorProto.STRING, "BYTES"),
        (TensorProto.UINT64, "UINT64"),
    ],
)
def test_datatypes_map_to_kserve_v2(tmp_path: Path, elem_type: int, datatype: str) -> None:
    graph = read_signature(make_onnx(tmp_path / "m.onnx", [("x", elem_type, [2])]))
    assert graph.inputs[0].datatype == datatype == graph.outputs[0].datatype


def test_type_kserve_cannot_carry_is_refused(tmp_path: Path) -> None:
    path = make_onnx(tmp_path / "m.onnx", [("z", TensorProto.COMPLEX64, [2])])
    with pytest.raises(
        SourceError,
        match=r"input 'z' has ONNX type COMPLEX64, which KServe v2 "
        r"cannot carry; supported: BOOL, UINT8",
    ):
        read_signature(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(
        SourceError,
        match=r"missing.onnx: cannot read the ONNX model "
        r"\(No such file or directory\)",
    ):
        read_signature(tmp_path / "missing.onnx")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x00\x01 not protobuf \xff\xfe", "not a valid ONNX model"),
        (b"", "not an ONNX model (no graph)"),
    ],
)
def test_corrupt_file(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    with pytest.raises(SourceError) as caught:
        read_signature(path)
    assert str(path) in str(caught.value) and message in str(caught.value)
