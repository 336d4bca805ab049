"""KServe v2 protobuf tensors <-> numpy arrays: ``to_*`` decodes, ``from_*`` encodes.

The wire format is KServe v2 / Open Inference Protocol (Triton's ``grpc_service.proto``):
a tensor's data is either one ``raw_input_contents`` / ``raw_output_contents`` entry
(little-endian, row-major; BYTES as elements each prefixed by a 4-byte little-endian
length; BF16 as 2-byte bfloat16 words, what tritonclient's ``serialize_bf16_tensor``
sends) or its typed ``contents`` field (:data:`CONTENTS_FIELD`: BF16 values travel in
``fp32_contents``, rounded to the nearest bfloat16). Datatype names and numpy dtypes
come from the one table in :mod:`mmaas.core.datatypes`; typed values are converted
with its one checked cast, so a value the datatype cannot hold is refused, never wrapped.
Every malformed tensor raises :class:`~mmaas.server.status.InvalidArgument` naming the
tensor and the field.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from mmaas.core.datatypes import BFLOAT16, NUMPY_BY_DATATYPE, cast_checked, from_numpy
from mmaas.core.errors import InputError, UsageError
from mmaas.server.status import InvalidArgument

# KServe v2 InferTensorContents field per datatype; FP16 travels only as raw bytes; BF16,
# a float32 cut to 16 bits, as float32 values (fp32_contents holds every BF16 exactly).
CONTENTS_FIELD: dict[str, str | None] = {
    "BOOL": "bool_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "FP16": None,
    "BF16": "fp32_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}
LENGTH_PREFIX = struct.Struct("<I")


class Tensor(Protocol):
    """What InferInputTensor and InferOutputTensor share (KServe v2 ``*Tensor``)."""

    name: str
    datatype: str
    shape: Any
    contents: Any

    def HasField(self, field_name: str) -> bool:
        """protobuf's presence test, e.g. ``HasField("contents")``."""
        ...


def to_array(
    tensor: Tensor, raw: bytes | memoryview | None, source: str = "raw_input_contents"
) -> np.ndarray:
    """Decode one tensor from ``raw`` (its raw contents entry, or its bytes in shared memory:
    ``source`` names where they came from in messages) or, when ``raw`` is None, from its
    typed ``contents``. BYTES become an ``object`` array of ``bytes``.

    Raises:
        InvalidArgument: unknown datatype, negative dims, a byte length or value count
            that does not match shape x element size, typed contents in the wrong field,
            or a BYTES length prefix that runs past the data.
    """
    where = f"input {tensor.name!r}"
    dtype = _numpy_dtype(tensor.datatype, where)
    shape = _shape(tensor.shape, where)
    count = math.prod(shape)
    if raw is None:
        return _from_contents(tensor, dtype, shape, count, where)
    if tensor.datatype == "BYTES":
        elements = decode_bytes(bytes(raw), count, f"{where}: {source}")
        return _object_array(elements, shape)
    expected = count * dtype.itemsize
    if len(raw) != expected:
        raise InvalidArgument(
            f"{where}: {source} holds {len(raw)} bytes, but shape {list(shape)} of "
            f"{tensor.datatype} ({dtype.itemsize} bytes each) needs {expected}"
        )
    return np.frombuffer(raw, dtype=dtype.newbyteorder("<")).reshape(shape)


def from_array(tensor: Tensor, array: np.ndarray, *, typed: bool = False) -> bytes | None:
    """Encode ``array`` into ``tensor`` (datatype and shape always; the data in its typed
    ``contents`` when ``typed``, else returned as the raw contents entry).

    Raises:
        UsageError: the array's dtype has no KServe v2 datatype, or ``typed`` is asked for
            FP16, which has no typed contents field.
    """
    datatype = from_numpy(array.dtype)
    tensor.datatype = datatype
    del tensor.shape[:]
    tensor.shape.extend(array.shape)
    if datatype == "BYTES":
        elements = [_as_bytes(value) for value in array.reshape(-1)]
        if not typed:
            return encode_bytes(elements)
        tensor.contents.bytes_contents.extend(elements)
        return None
    if not typed:
        return np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
    field = CONTENTS_FIELD[datatype]
    if field is None:
        raise UsageError(f"{datatype} has no typed contents field in KServe v2; send it raw")
    flat = array.reshape(-1)
    getattr(tensor.contents, field).extend(
        (flat.astype(np.float32) if array.dtype == BFLOAT16 else flat).tolist()
    )
    return None


def to_inputs(
    inputs: Sequence[Tensor],
    raw_contents: Sequence[bytes],
    shared: Mapping[str, tuple[memoryview, str]] | None = None,
) -> dict[str, np.ndarray]:
    """Decode a ModelInferRequest's ``inputs`` into ``{name: array}``. ``shared`` holds the
    bytes of the inputs in shared memory (``{name: (bytes, where they lie)}``); the
    ``raw_input_contents`` entries pair, in order, with the other inputs (one each, or none
    at all: then every other input has typed contents), as Triton pairs them.

    Raises:
        InvalidArgument: raw entries do not pair one-to-one with those inputs, an input
            has both raw (or shared memory) and typed data, an input name repeats, or a
            tensor is malformed.
    """
    shared = shared or {}
    plain = [tensor for tensor in inputs if tensor.name not in shared]
    if raw_contents and len(raw_contents) != len(plain):
        held = f" (and {len(inputs) - len(plain)} in shared memory)" if shared else ""
        raise InvalidArgument(
            f"raw_input_contents has {len(raw_contents)} entries for {len(plain)} inputs{held}; "
            "send one per input, in the order of inputs, or use typed contents for all"
        )
    raw_entries = iter(raw_contents)
    arrays: dict[str, np.ndarray] = {}
    for tensor in inputs:
        if tensor.name in arrays:
            raise InvalidArgument(f"input {tensor.name!r} appears twice in inputs")
        if tensor.name in shared:
            data, source = shared[tensor.name]
            raw: bytes | memoryview | None = data
        else:
            raw, source = (next(raw_entries) if raw_contents else None), "raw_input_contents"
        if raw is not None and tensor.HasField("contents"):
            raise InvalidArgument(
                f"input {tensor.name!r} has both {source.split(' (')[0]} and "
                "typed contents; send one of them"
            )
        arrays[tensor.name] = to_array(tensor, raw, source)
    return arrays


def from_outputs(response: Any, arrays: Mapping[str, np.ndarray]) -> None:
    """Append each array to a ModelInferResponse as an output tensor (by name, in the
    mapping's order) with its data in ``raw_output_contents``."""
    for name, array in arrays.items():
        tensor = response.outputs.add(name=name)
        raw = from_array(tensor, array)
        response.raw_output_contents.append(raw)


def decode_bytes(raw: bytes, count: int, where: str) -> list[bytes]:
    """Split KServe v2 raw BYTES into ``count`` elements (4-byte little-endian length,
    then that many bytes; empty elements allowed).

    Raises:
        InvalidArgument: a length prefix is cut short or claims more bytes than follow,
            fewer than ``count`` elements are present, or bytes are left over.
    """
    elements: list[bytes] = []
    offset = 0
    view = memoryview(raw)
    for index in range(count):
        if offset + LENGTH_PREFIX.size > len(raw):
            raise InvalidArgument(
                f"{where}: BYTES element {index} of {count} is missing "
                f"(only {len(raw) - offset} bytes left at offset {offset}, "
                "a 4-byte length prefix is needed)"
            )
        (length,) = LENGTH_PREFIX.unpack_from(view, offset)
        offset += LENGTH_PREFIX.size
        if offset + length > len(raw):
            raise InvalidArgument(
                f"{where}: BYTES element {index} claims {length} bytes but "
                f"only {len(raw) - offset} follow its length prefix"
            )
        elements.append(bytes(view[offset : offset + length]))
        offset += length
    if offset != len(raw):
        raise InvalidArgument(
            f"{where}: {len(raw) - offset} bytes left after the {count} "
            "BYTES elements the shape calls for"
        )
    return elements


def encode_bytes(elements: Sequence[bytes]) -> bytes:
    """Join BYTES elements as KServe v2 raw contents: each a 4-byte LE length + data."""
    return b"".join(LENGTH_PREFIX.pack(len(element)) + element for element in elements)


def _from_contents(
    tensor: Tensor, dtype: np.dtype, shape: tuple[int, ...], count: int, where: str
) -> np.ndarray:
    field = CONTENTS_FIELD[tensor.datatype]
    present = [descriptor.name for descriptor, _ in tensor.contents.ListFields()]
    if field is None:
        raise InvalidArgument(
            f"{where}: {tensor.datatype} has no typed contents field in "
            "KServe v2; send it in raw_input_contents"
        )
    if present and present != [field]:
        raise InvalidArgument(
            f"{where}: {tensor.datatype} data goes in contents.{field}, "
            f"got contents.{', contents.'.join(present)}"
        )
    values = getattr(tensor.contents, field)
    if len(values) != count:
        raise InvalidArgument(
            f"{where}: contents.{field} holds {len(values)} values, but "
            f"shape {list(shape)} needs {count}"
        )
    if tensor.datatype == "BYTES":
        return _object_array(list(values), shape)
    try:
        return cast_checked(np.array(values), dtype, f"{where}: contents.{field}").reshape(shape)
    except InputError as exc:
        raise InvalidArgument(exc.message) from None


def _object_array(elements: list[bytes], shape: tuple[int, ...]) -> np.ndarray:
    array = np.empty(len(elements), dtype=object)
    array[:] = elements
    return array.reshape(shape)


def _numpy_dtype(datatype: str, where: str) -> np.dtype:
    try:
        return NUMPY_BY_DATATYPE[datatype]
    except KeyError:
        raise InvalidArgument(
            f"{where}: datatype {datatype!r} is not a KServe v2 datatype "
            f"({', '.join(NUMPY_BY_DATATYPE)})"
        ) from None


def _shape(dims: Sequence[int], where: str) -> tuple[int, ...]:
    if any(dim < 0 for dim in dims):
        raise InvalidArgument(
            f"{where}: shape {list(dims)} has a negative dim; a request "
            "states the concrete size of every axis"
        )
    return tuple(dims)


def _as_bytes(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return str(value).encode()
