"""Triton's rules for an ONNX model's config, written from Triton's ONNX Runtime back end
(its ``ValidateInputs``/``ValidateOutputs`` and the back-end library's
``CompareDimsSupported``) as an oracle independent of mmaas: the config is parsed with
Triton's own ``model_config.proto`` (the stubs shipped in tritonclient) and the graph's
declared shapes are read with the onnx package.

* every config tensor has ``dims`` (Triton's core refuses an empty one) and is a graph
  tensor of the same datatype;
* the shape checked is ``reshape.shape`` when a reshape is given, else ``dims``;
* ``max_batch_size > 0``: axis 0 of the graph tensor must be dynamic (-1), and the rest
  of its axes are compared; else all of them;
* inputs: the same rank, each graph size -1 or equal; outputs: exactly equal;
* a rank-0 graph tensor: every config dim must be 1 (so ``dims: [1]`` with
  ``reshape: { shape: [] }``);
* ``dynamic_batching`` needs ``max_batch_size > 0``.
"""

from __future__ import annotations

from pathlib import Path

import onnx
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as triton

ONNX_TYPES = {
    "TYPE_FP32": onnx.TensorProto.FLOAT,
    "TYPE_FP16": onnx.TensorProto.FLOAT16,
    "TYPE_INT64": onnx.TensorProto.INT64,
    "TYPE_INT32": onnx.TensorProto.INT32,
    "TYPE_BOOL": onnx.TensorProto.BOOL,
    "TYPE_STRING": onnx.TensorProto.STRING,
}


def parse(path: Path):
    """config.pbtxt as Triton's ModelConfig."""
    return text_format.Parse(path.read_text(), triton.ModelConfig())


def declared(graph: Path) -> dict[str, tuple[int, list[int]]]:
    """name -> (ONNX element type, declared dims with -1 for a symbolic or missing size)."""
    model = onnx.load(str(graph), load_external_data=False)
    found = {}
    for value in (*model.graph.input, *model.graph.output):
        kind = value.type.tensor_type
        dims = [d.dim_value if d.dim_value > 0 else -1 for d in kind.shape.dim]
        found[value.name] = (kind.elem_type, dims)
    return found


def problems(config, graph: Path) -> list[str]:
    """Why Triton would refuse to load ``config`` over ``graph`` (empty: it loads)."""
    tensors = declared(graph)
    found = []
    batching = config.max_batch_size > 0
    if config.HasField("dynamic_batching") and not batching:
        found.append("dynamic_batching with max_batch_size 0")
    entries = [(t, False) for t in config.input] + [(t, True) for t in config.output]
    for tensor, exact in entries:
        if not tensor.dims:
            found.append(f"{tensor.name}: no dims (Triton: must specify 'dims')")
        if tensor.name not in tensors:
            found.append(f"{tensor.name}: not in the graph")
            continue
        elem, model_dims = tensors[tensor.name]
        name = triton.DataType.Name(tensor.data_type)
        if ONNX_TYPES.get(name) != elem:
            found.append(f"{tensor.name}: {name} but the graph has element type {elem}")
        dims = list(tensor.reshape.shape) if tensor.HasField("reshape") else list(tensor.dims)
        if not model_dims:
            if any(dim != 1 for dim in dims):
                found.append(f"{tensor.name}: scalar in the graph, config dims {dims}")
            continue
        if batching:
            if model_dims[0] != -1:
                found.append(f"{tensor.name}: batching, but the graph's axis 0 is {model_dims[0]}")
                continue
            model_dims = model_dims[1:]
        if len(dims) != len(model_dims):
            found.append(f"{tensor.name}: config {dims}, graph {model_dims} (rank)")
        elif exact and dims != model_dims:
            found.append(f"{tensor.name}: config {dims}, graph {model_dims} (outputs exact)")
        elif any(m != -1 and m != d for m, d in zip(model_dims, dims, strict=True)):
            found.append(f"{tensor.name}: config {dims}, graph {model_dims}")
    return found
