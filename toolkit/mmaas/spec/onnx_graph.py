"""Read an ONNX model's graph signature: input and output names, datatypes and shapes.

Only the graph is read (``onnx.load(path, load_external_data=False)``), so a model whose
weights live in external data files is inspected without loading them. Datatypes are
mapped from ONNX ``TensorProto`` element types to KServe v2 datatype strings
(kserve/open-inference-protocol, "Tensor Data Types") by :data:`ONNX_TO_KSERVE`.

A dim is *dynamic* when it has no positive value: a ``dim_param`` of any text (``N``,
``?``, ``batch _size``, ``p2o.DynamicDimension.0``), a ``dim_value`` of 0 or -1 (what some
exporters write), or neither. Dynamic dims are reported as ``-1``; the symbol is kept in
``dim_names`` for messages only: profiles match inputs by name and axis, never by symbol.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError
from onnx import external_data_helper

from mmaas.core.errors import SourceError
from mmaas.spec.model import Datatype

# ONNX TensorProto.DataType -> KServe v2 datatype. Types KServe v2 cannot carry (complex,
# float8, 4-bit...) are absent and refused.
ONNX_TO_KSERVE: dict[int, Datatype] = {
    onnx.TensorProto.BOOL: "BOOL",
    onnx.TensorProto.UINT8: "UINT8",
    onnx.TensorProto.UINT16: "UINT16",
    onnx.TensorProto.UINT32: "UINT32",
    onnx.TensorProto.UINT64: "UINT64",
    onnx.TensorProto.INT8: "INT8",
    onnx.TensorProto.INT16: "INT16",
    onnx.TensorProto.INT32: "INT32",
    onnx.TensorProto.INT64: "INT64",
    onnx.TensorProto.FLOAT16: "FP16",
    onnx.TensorProto.FLOAT: "FP32",
    onnx.TensorProto.DOUBLE: "FP64",
    onnx.TensorProto.BFLOAT16: "BF16",
    onnx.TensorProto.STRING: "BYTES",
}


@dataclass(frozen=True)
class GraphTensor:
    """One graph input or output as the ONNX file declares it.

    Attributes:
        name: the exact tensor name (may hold ``.``, ``/``, ``:``, spaces).
        datatype: KServe v2 datatype (``FP32``, ``INT64``, ``BYTES``...).
        shape: one entry per axis, ``-1`` for a dynamic dim; ``()`` for a scalar; None when
            the file declares no shape at all (rank unknown).
        dim_names: per axis, the ``dim_param`` symbol (``""`` when there is none).
    """

    name: str
    datatype: Datatype
    shape: tuple[int, ...] | None
    dim_names: tuple[str, ...] = ()

    @property
    def dynamic_axes(self) -> tuple[int, ...]:
        """Indexes of the dynamic axes (empty for a static shape or unknown rank)."""
        return tuple(axis for axis, dim in enumerate(self.shape or ()) if dim == -1)


@dataclass(frozen=True)
class GraphSignature:
    """The served surface of an ONNX model: graph inputs (initializers excluded) and
    outputs, in graph order. ``path`` is the file read."""

    path: Path
    inputs: tuple[GraphTensor, ...]
    outputs: tuple[GraphTensor, ...]

    def input(self, name: str) -> GraphTensor | None:
        """The input called exactly ``name``, or None."""
        return next((tensor for tensor in self.inputs if tensor.name == name), None)

    def output(self, name: str) -> GraphTensor | None:
        """The output called exactly ``name``, or None."""
        return next((tensor for tensor in self.outputs if tensor.name == name), None)


def read_signature(path: Path) -> GraphSignature:
    """Read the inputs and outputs of the ONNX model at ``path``.

    Graph inputs that are also initializers (weights exposed as inputs by old exporters)
    are left out: they are not fed by clients.

    Raises:
        SourceError: the file is missing, unreadable, not an ONNX model, or has a tensor of
            a type KServe v2 cannot carry (names the tensor and its ONNX type).
    """
    try:
        model = onnx.load(str(path), load_external_data=False)
    except OSError as exc:
        raise SourceError(f"{path}: cannot read the ONNX model ({exc.strerror or exc})") from exc
    except (DecodeError, ValueError) as exc:
        raise SourceError(
            f"{path}: not a valid ONNX model (it does not parse as an ONNX "
            "protobuf); re-export or re-download it"
        ) from exc
    if not model.ir_version or not model.HasField("graph"):
        raise SourceError(f"{path}: not an ONNX model (no graph); re-export or re-download it")
    weights = {init.name for init in model.graph.initializer}
    inputs = tuple(
        _tensor(path, "input", value) for value in model.graph.input if value.name not in weights
    )
    outputs = tuple(_tensor(path, "output", value) for value in model.graph.output)
    return GraphSignature(path, inputs, outputs)


def _tensor(path: Path, role: str, value: onnx.ValueInfoProto) -> GraphTensor:
    if value.type.WhichOneof("value") != "tensor_type":
        raise SourceError(
            f"{path}: {role} {value.name!r} is a "
            f"{value.type.WhichOneof('value') or 'untyped value'}, not a tensor; "
            "mmaas serves tensors only"
        )
    tensor_type = value.type.tensor_type
    datatype = ONNX_TO_KSERVE.get(tensor_type.elem_type)
    if datatype is None:
        onnx_name = onnx.TensorProto.DataType.Name(tensor_type.elem_type)
        raise SourceError(
            f"{path}: {role} {value.name!r} has ONNX type {onnx_name}, which "
            f"KServe v2 cannot carry; supported: {_supported()}"
        )
    if not tensor_type.HasField("shape"):
        return GraphTensor(value.name, datatype, None)
    dims = tensor_type.shape.dim
    shape = tuple(dim.dim_value if dim.dim_value > 0 else -1 for dim in dims)
    return GraphTensor(value.name, datatype, shape, tuple(dim.dim_param for dim in dims))


def _supported() -> str:
    return ", ".join(onnx.TensorProto.DataType.Name(code) for code in ONNX_TO_KSERVE)


def external_data_files(path: Path) -> tuple[str, ...]:
    """Locations (relative to the model's folder, as ONNX records them) of the external
    data files that hold the weights of a model saved with ``save_as_external_data``
    (the ONNX external data format, needed above 2 GiB); empty for a self-contained file.

    Raises:
        SourceError: the file cannot be read or parsed, or a location escapes its folder.
    """
    try:
        model = onnx.load(str(path), load_external_data=False)
    except (OSError, DecodeError, ValueError) as exc:
        raise SourceError(f"{path}: cannot read the ONNX model ({exc})") from exc
    locations = {
        entry.value
        for tensor in external_data_helper._get_all_tensors(model)
        if external_data_helper.uses_external_data(tensor)
        for entry in tensor.external_data
        if entry.key == "location"
    }
    for location in locations:
        if Path(location).is_absolute() or ".." in Path(location).parts:
            raise SourceError(
                f"{path}: external data location {location!r} leaves the "
                "model's folder; save the weights beside the .onnx file"
            )
    return tuple(sorted(locations))
