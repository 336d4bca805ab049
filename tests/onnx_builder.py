"""Build small, valid ONNX models in tests (onnx.helper): odd names and dims on demand.

Each output is an ``Identity`` of an input, so the graphs also run in ONNX Runtime when
their shapes agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# One dim: an int (dim_value, may be 0 or -1 as some exporters write), a str (dim_param,
# any text) or None (neither).
Dim = int | str | None
Tensor = tuple[str, int, Sequence[Dim] | None]  # name, TensorProto elem type, dims (None: no shape)

FLOAT = TensorProto.FLOAT
OPSET = 17


def value_info(name: str, elem_type: int, dims: Sequence[Dim] | None) -> onnx.ValueInfoProto:
    """A tensor ValueInfo whose dims are set exactly as given (see :data:`Dim`)."""
    info = helper.make_tensor_value_info(name, elem_type, None)
    if dims is None:
        return info
    shape = info.type.tensor_type.shape
    shape.SetInParent()
    for dim in dims:
        entry = shape.dim.add()
        if isinstance(dim, int):
            entry.dim_value = dim
        elif isinstance(dim, str):
            entry.dim_param = dim
    return info


def onnx_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[onnx.ValueInfoProto],
    outputs: Sequence[onnx.ValueInfoProto],
    initializer: Sequence[onnx.TensorProto] = (),
    graph_name: str = "test",
) -> onnx.ModelProto:
    """A model of one graph (``nodes`` between ``inputs`` and ``outputs``), default opset
    :data:`OPSET`, IR version 8 (what ONNX Runtime and TensorRT 8+ read)."""
    graph = helper.make_graph(nodes, graph_name, inputs, outputs, initializer=initializer)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    return model


def make_onnx(
    path: Path,
    inputs: Sequence[Tensor],
    outputs: Sequence[Tensor] | None = None,
    weights_as_inputs: Sequence[str] = (),
) -> Path:
    """Write a model with ``inputs`` and ``outputs`` (default: ``<input>_out`` copies of
    every input) to ``path``. ``weights_as_inputs`` names initializers that are also
    listed as graph inputs, as old exporters did."""
    if outputs is None:
        outputs = [(f"{name}_out", kind, dims) for name, kind, dims in inputs]
    nodes = [
        helper.make_node("Identity", [inputs[index % len(inputs)][0]], [out[0]])
        for index, out in enumerate(outputs)
    ]
    weights = [
        numpy_helper.from_array(np.zeros((2,), np.float32), name) for name in weights_as_inputs
    ]
    model = onnx_model(
        nodes,
        [value_info(*tensor) for tensor in inputs]
        + [value_info(name, FLOAT, [2]) for name in weights_as_inputs],
        [value_info(*tensor) for tensor in outputs],
        weights,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


IMAGE_MODEL: list[Tensor] = [("x", FLOAT, ["N", 3, "H", "W"])]
