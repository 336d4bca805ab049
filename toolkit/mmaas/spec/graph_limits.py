"""What an ONNX graph itself forbids of its inputs' sizes, where a static look can tell.

``mmaas init`` suggests a profile for every dynamic axis; a guess below what the graph can
run (a reflect ``Pad`` of ``p`` needs that axis to be at least ``p + 1``: ONNX Runtime
refuses "pre-pad exceeds maximum allowed") would fail the first build's profile check. The
look is local and conservative: a ``Pad`` with ``mode=reflect`` whose pads are constant (an
initializer, a ``Constant`` node or the opset < 11 ``pads`` attribute; opset 18 ``axes``
honoured) and whose data is a graph input, directly or through shape-preserving ops
(unary element-wise ops, and binary ones whose other operand is a constant of no higher
rank). Anything it cannot follow gives no limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError
from onnx import numpy_helper

SHAPE_PRESERVING_UNARY = {
    "Abs", "Cast", "Ceil", "Clip", "Dropout", "Elu", "Erf", "Exp", "Floor", "Gelu",
    "HardSigmoid", "HardSwish", "Identity", "LeakyRelu", "Log", "Mish", "Neg", "Reciprocal",
    "Relu", "Round", "Selu", "Sigmoid", "Sign", "Softplus", "Softsign", "Sqrt", "Tanh",
}  # fmt: skip
SHAPE_PRESERVING_BINARY = {"Add", "Sub", "Mul", "Div", "Pow"}

# (input name, axis) -> the smallest size the graph runs at
Minimums = dict[tuple[str, int], int]


def axis_minimums(path: Path) -> Minimums:
    """Per (graph input, axis), the smallest size the graph can run at, from every reflect
    ``Pad`` this look can follow (see the module docstring); axes with no limit are absent.
    An unreadable model gives no limits (``init`` reports it elsewhere)."""
    try:
        model = onnx.load(str(path), load_external_data=False)
    except (OSError, ValueError, DecodeError):
        return {}
    graph = model.graph
    constants = _constants(graph)
    producers = {output: node for node in graph.node for output in node.output}
    inputs = {value.name: len(value.type.tensor_type.shape.dim) for value in graph.input}
    limits: Minimums = {}
    for node in graph.node:
        if node.op_type != "Pad" or _mode(node) != "reflect":
            continue
        source = _graph_input(node.input[0], producers, constants, inputs)
        pads = _pads(node, constants, inputs.get(source or "", 0))
        if source is None or pads is None:
            continue
        for axis, pad in pads.items():
            if pad > 0:
                key = (source, axis)
                limits[key] = max(limits.get(key, 1), pad + 1)
    return limits


def _constants(graph: onnx.GraphProto) -> Mapping[str, list[int]]:
    values: dict[str, list[int]] = {}
    for tensor in graph.initializer:
        values[tensor.name] = numpy_helper.to_array(tensor).reshape(-1).tolist()
    for node in graph.node:
        if node.op_type == "Constant":
            for attribute in node.attribute:
                if attribute.name == "value":
                    array = numpy_helper.to_array(attribute.t)
                    values[node.output[0]] = array.reshape(-1).tolist()
    return values


def _mode(node: onnx.NodeProto) -> str:
    for attribute in node.attribute:
        if attribute.name == "mode":
            return attribute.s.decode()
    return "constant"


def _graph_input(
    name: str,
    producers: Mapping[str, onnx.NodeProto],
    constants: Mapping[str, list[int]],
    inputs: Mapping[str, int],
) -> str | None:
    """The graph input ``name`` has the shape of, following shape-preserving ops."""
    for _ in range(64):
        if name in inputs and name not in constants:
            return name
        node = producers.get(name)
        if node is None:
            return None
        if node.op_type in SHAPE_PRESERVING_UNARY:
            name = node.input[0]
        elif node.op_type in SHAPE_PRESERVING_BINARY and len(node.input) == 2:
            others = [operand for operand in node.input if operand in constants]
            if len(others) != 1:
                return None
            name = next(operand for operand in node.input if operand not in constants)
        else:
            return None
    return None


def _pads(
    node: onnx.NodeProto, constants: Mapping[str, list[int]], rank: int
) -> dict[int, int] | None:
    """axis -> the larger of its begin and end pad, or None when not constant."""
    values: list[int] | None = None
    if len(node.input) > 1 and node.input[1]:
        values = constants.get(node.input[1])
    else:
        values = next((list(a.ints) for a in node.attribute if a.name == "pads"), None)
    if values is None or len(values) % 2:
        return None
    half = len(values) // 2
    axes: list[int] = list(range(half))
    if len(node.input) > 3 and node.input[3]:
        given = constants.get(node.input[3])
        if given is None:
            return None
        axes = [axis % rank if rank else axis for axis in given]
    return {axis: max(values[i], values[i + half]) for i, axis in enumerate(axes)}
