"""Small ONNX graphs (onnx.helper) that exercise one server behaviour each, with the
ModelInfo (served signature + optimization profile) the builder stage compiles them for.

Each entry: ``name -> (onnx.ModelProto, ModelInfo)``.
"""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from mmaas.core.manifest import ModelInfo, TensorInfo
from onnx_builder import onnx_model, value_info

ONNX_TYPES = {
    "FP16": TensorProto.FLOAT16,
    "FP32": TensorProto.FLOAT,
    "INT64": TensorProto.INT64,
    "INT32": TensorProto.INT32,
    "BOOL": TensorProto.BOOL,
    "UINT8": TensorProto.UINT8,
    "BYTES": TensorProto.STRING,
}


def _model(
    nodes: list[onnx.NodeProto],
    inputs: list[TensorInfo],
    outputs: list[TensorInfo],
    initializer: tuple[onnx.TensorProto, ...] = (),
) -> onnx.ModelProto:
    def value(tensor: TensorInfo) -> onnx.ValueInfoProto:
        dims = [None if d < 0 else d for d in tensor.shape]
        return value_info(tensor.name, ONNX_TYPES[tensor.datatype], dims)

    values = [value(t) for t in inputs], [value(t) for t in outputs]
    return onnx_model(nodes, *values, initializer, graph_name="g")


def _info(
    name: str,
    inputs: list[TensorInfo],
    outputs: list[TensorInfo],
    max_batch_size: int,
    version: str = "1",
) -> ModelInfo:
    return ModelInfo(
        name=name,
        version=version,
        backend="onnxruntime",
        precision="fp32",
        max_batch_size=max_batch_size,
        inputs=tuple(inputs),
        outputs=tuple(outputs),
    )


KINDS = {
    "a": ("FP16", "Add"),
    "b": ("INT64", "Neg"),
    "c": ("INT32", "Add"),
    "d": ("BOOL", "Not"),
    "e": ("UINT8", "Identity"),
}


def datatypes_model(
    name: str = "datatypes", names: str = "abcde"
) -> tuple[onnx.ModelProto, ModelInfo]:
    """FP16/INT64/INT32/BOOL/UINT8 inputs ``a..e`` [-1, 4] (batch 1..4) -> ``a_out = a + a``,
    ``b_out = -b``, ``c_out = c + c``, ``d_out = not d``, ``e_out = e``; ``names`` picks
    the inputs."""
    kinds = {n: KINDS[n] for n in names}
    inputs = [
        TensorInfo(n, dt, (-1, 4), min=(1, 4), opt=(2, 4), max=(4, 4))
        for n, (dt, _) in kinds.items()
    ]
    outputs = [TensorInfo(f"{n}_out", dt, (-1, 4)) for n, (dt, _) in kinds.items()]
    nodes = [
        helper.make_node(op, [n, n] if op == "Add" else [n], [f"{n}_out"])
        for n, (_, op) in kinds.items()
    ]
    return _model(nodes, inputs, outputs), _info(name, inputs, outputs, 4)


def integers_model() -> tuple[onnx.ModelProto, ModelInfo]:
    """:func:`datatypes_model` without the FP16 input (all typed contents can be used)."""
    return datatypes_model("integers", "bcde")


def strings_model() -> tuple[onnx.ModelProto, ModelInfo]:
    """BYTES ``text`` [-1] -> Identity ``same`` (C15); 1..8 elements, no batch axis."""
    inputs = [TensorInfo("text", "BYTES", (-1,), min=(1,), opt=(2,), max=(8,))]
    outputs = [TensorInfo("same", "BYTES", (-1,))]
    nodes = [helper.make_node("Identity", ["text"], ["same"])]
    return _model(nodes, inputs, outputs), _info("strings", inputs, outputs, 0)


def two_outputs_model() -> tuple[onnx.ModelProto, ModelInfo]:
    """FP32 ``x`` [-1, 4] -> ``boxes = 2 x`` [-1, 4] and ``scores = sum(x, axis 1)``
    [-1, 1] (C18: requested outputs)."""
    inputs = [TensorInfo("x", "FP32", (-1, 4), min=(1, 4), opt=(1, 4), max=(8, 4))]
    outputs = [TensorInfo("boxes", "FP32", (-1, 4)), TensorInfo("scores", "FP32", (-1, 1))]
    nodes = [
        helper.make_node("Add", ["x", "x"], ["boxes"]),
        helper.make_node("ReduceSum", ["x", "axes"], ["scores"], keepdims=1),
    ]
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    return _model(nodes, inputs, outputs, (axes,)), _info("two-outputs", inputs, outputs, 8)


def mistakes_model() -> tuple[onnx.ModelProto, ModelInfo]:
    """FP32 ``x`` [-1, 2], UINT8 ``n`` [-1, 2] and BYTES ``t`` [-1, 1] (batch 1..4), each
    returned as is (``x_out``, ``n_out``, ``t_out``): one input of each kind of data, for
    sending the same malformed request over gRPC and HTTP."""
    inputs = [
        TensorInfo(name, datatype, (-1, dims), min=(1, dims), opt=(2, dims), max=(4, dims))
        for name, datatype, dims in (("x", "FP32", 2), ("n", "UINT8", 2), ("t", "BYTES", 1))
    ]
    outputs = [TensorInfo(f"{t.name}_out", t.datatype, t.shape) for t in inputs]
    nodes = [helper.make_node("Identity", [t.name], [f"{t.name}_out"]) for t in inputs]
    return _model(nodes, inputs, outputs), _info("mistakes", inputs, outputs, 4)


def large_model() -> tuple[onnx.ModelProto, ModelInfo]:
    """FP32 ``x`` [-1, 3, -1, -1] -> ``y = -x``, profile up to 8x3x640x640 (39 MB in and
    out: C16, messages over 4 MiB)."""
    inputs = [
        TensorInfo(
            "x",
            "FP32",
            (-1, 3, -1, -1),
            min=(1, 3, 32, 32),
            opt=(1, 3, 32, 32),
            max=(8, 3, 640, 640),
        )
    ]
    outputs = [TensorInfo("y", "FP32", (-1, 3, -1, -1))]
    return _model([helper.make_node("Neg", ["x"], ["y"])], inputs, outputs), _info(
        "large", inputs, outputs, 8
    )


def ppocr_det_info() -> ModelInfo:
    """PP-OCRv4 detection as served (MODELS.md): ``x`` FP32 up to 4x3x1280x1280."""
    inputs = [
        TensorInfo(
            "x",
            "FP32",
            (-1, 3, -1, -1),
            min=(1, 3, 32, 32),
            opt=(1, 3, 640, 640),
            max=(4, 3, 1280, 1280),
        )
    ]
    outputs = [TensorInfo("sigmoid_0.tmp_0", "FP32", (-1, 1, -1, -1))]
    return _info("ppocr-det", inputs, outputs, 4, version="1.0.0")


def ppocr_cls_info() -> ModelInfo:
    """PP-OCR direction classifier: ``x`` FP32 [-1, 3, 48, 192], batch 1..32; output name
    with a ``/``."""
    inputs = [
        TensorInfo(
            "x",
            "FP32",
            (-1, 3, 48, 192),
            min=(1, 3, 48, 192),
            opt=(8, 3, 48, 192),
            max=(32, 3, 48, 192),
        )
    ]
    outputs = [TensorInfo("save_infer_model/scale_0.tmp_1", "FP32", (-1, 2))]
    return _info("ppocr-cls", inputs, outputs, 32, version="1.0.0")


def lookup_model() -> tuple[onnx.ModelProto, ModelInfo]:
    """INT64 ``idx`` [-1, 1] (batch 1..8) -> ``value = table[idx]`` FP32 [-1, 1] over the
    table 0..7: an index outside -8..7 is refused by ONNX Runtime's Gather (INVALID_ARGUMENT),
    a request value the engine refuses."""
    inputs = [TensorInfo("idx", "INT64", (-1, 1), min=(1, 1), opt=(1, 1), max=(8, 1))]
    outputs = [TensorInfo("value", "FP32", (-1, 1))]
    table = helper.make_tensor("table", TensorProto.FLOAT, [8], [float(i) for i in range(8)])
    nodes = [helper.make_node("Gather", ["table", "idx"], ["value"])]
    return _model(nodes, inputs, outputs, (table,)), _info("lookup", inputs, outputs, 8)


def scalars_model() -> tuple[onnx.ModelProto, ModelInfo]:
    """Rank-0 tensors: FP32 ``gain`` [] and ``x`` [-1] (1..8 values, no batch axis) ->
    ``y = x * gain`` [-1] and ``total = sum(y)`` [] (a scalar output)."""
    inputs = [
        TensorInfo("gain", "FP32", ()),
        TensorInfo("x", "FP32", (-1,), min=(1,), opt=(4,), max=(8,)),
    ]
    outputs = [TensorInfo("y", "FP32", (-1,)), TensorInfo("total", "FP32", ())]
    nodes = [
        helper.make_node("Mul", ["x", "gain"], ["y"]),
        helper.make_node("ReduceSum", ["y"], ["total"], keepdims=0),
    ]
    return _model(nodes, inputs, outputs), _info("scalars", inputs, outputs, 0)


def batch_only_model() -> tuple[onnx.ModelProto, ModelInfo]:
    """INT64 ``n`` [-1] (batch 1..4, no other dim) -> ``twice = n + n`` [-1]: a scalar per
    batch row, which Triton declares as dims [1] with reshape { shape: [] }."""
    inputs = [TensorInfo("n", "INT64", (-1,), min=(1,), opt=(2,), max=(4,))]
    outputs = [TensorInfo("twice", "INT64", (-1,))]
    nodes = [helper.make_node("Add", ["n", "n"], ["twice"])]
    return _model(nodes, inputs, outputs), _info("batch-only", inputs, outputs, 4)
