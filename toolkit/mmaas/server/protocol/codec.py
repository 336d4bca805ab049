"""The one tensor codec: raw bytes and typed values <-> numpy arrays, for every front end.

Raw bytes (gRPC ``raw_input_contents`` / ``raw_output_contents``, Triton's HTTP binary
tensor data, system shared memory): little-endian, row-major; BYTES as elements each
prefixed by a 4-byte little-endian length (empty elements allowed); BF16 as 2-byte
bfloat16 words (what tritonclient's ``serialize_bf16_tensor`` sends); BOOL one byte each.
Typed values (HTTP JSON ``data``, gRPC typed ``contents``): flat, or nested exactly as the
shape; numbers for numeric datatypes, booleans for BOOL, strings (or bytes) for BYTES;
converted with the one checked cast (:func:`mmaas.core.datatypes.cast_checked`), so a value
the datatype cannot hold is refused, never wrapped. Datatype names and numpy dtypes come
from the one table in :mod:`mmaas.core.datatypes`; BYTES arrays are numpy ``object`` arrays
of ``bytes``.

Every malformed tensor raises :class:`~mmaas.server.status.InvalidArgument` worded here,
naming the input, what it holds and what its shape and datatype need, before anything its
claims would size is allocated.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from mmaas.core.cuda import DeviceArray
from mmaas.core.datatypes import NUMPY_BY_DATATYPE, cast_checked, from_numpy, is_floating
from mmaas.core.errors import InputError
from mmaas.server.protocol.types import InferInput
from mmaas.server.status import InvalidArgument

LENGTH_PREFIX = struct.Struct("<I")
# numpy kinds typed values may hold for each kind of datatype (JSON numbers: int or float)
ACCEPTED_KINDS = {"f": "fiu", "i": "iu", "u": "iu", "b": "b"}
KIND_NAMES = {"f": "numbers", "i": "integers", "u": "integers", "b": "booleans"}
HELD = {"f": "floats", "i": "integers", "u": "integers", "b": "booleans", "U": "strings"}


def numpy_dtype(datatype: object, where: str) -> np.dtype:
    """The numpy dtype of a KServe v2 datatype name (``where`` names the tensor).

    Raises:
        InvalidArgument: not a KServe v2 datatype (a JSON header may send any value).
    """
    dtype = NUMPY_BY_DATATYPE.get(datatype) if isinstance(datatype, str) else None
    if dtype is None:
        raise InvalidArgument(
            f"{where}: datatype {datatype!r} is not a KServe v2 datatype "
            f"({', '.join(NUMPY_BY_DATATYPE)})"
        )
    return dtype


def from_raw(tensor: InferInput, raw: bytes | memoryview, source: str = "") -> np.ndarray:
    """``tensor``'s array from its raw bytes (no copy for fixed-size datatypes); ``source``
    says where the bytes lie in messages (``" in shared memory region 'r'"``).

    Raises:
        InvalidArgument: unknown datatype, a negative dim, a byte count other than shape x
            element size, or malformed BYTES (see :func:`decode_bytes`).
    """
    if tensor.datatype == "BYTES":
        where, _, shape = _header(tensor)
        return _object_array(decode_bytes(raw, math.prod(shape), where + source), shape)
    _, dtype, shape = _check_byte_count(tensor, len(raw), source)
    return np.frombuffer(raw, dtype=dtype.newbyteorder("<")).reshape(shape)


def from_device(tensor: InferInput, raw: DeviceArray, source: str) -> np.ndarray | DeviceArray:
    """``tensor``'s array from its bytes in device memory (a CUDA shared memory region):
    the same device memory viewed with the tensor's dtype and shape (no copy), or for
    BYTES, parsed on the host.

    Raises:
        InvalidArgument: as :func:`from_raw`.
    """
    if tensor.datatype == "BYTES":
        return from_raw(tensor, raw.to_host().data, source)
    _, dtype, shape = _check_byte_count(tensor, raw.nbytes, source)
    return DeviceArray(raw.pointer, shape, dtype, raw.device, raw.owner)


def _check_byte_count(
    tensor: InferInput, held: int, source: str
) -> tuple[str, np.dtype, tuple[int, ...]]:
    """``_header(tensor)`` once ``held`` bytes are what its fixed-size shape needs.

    Raises:
        InvalidArgument: another byte count (or a bad header).
    """
    where, dtype, shape = _header(tensor)
    expected = math.prod(shape) * dtype.itemsize
    if held != expected:
        raise InvalidArgument(
            f"{where}: the data{source} holds {held} bytes, but shape {list(shape)} of "
            f"{tensor.datatype} ({dtype.itemsize} bytes each) needs {expected}"
        )
    return where, dtype, shape


def from_values(tensor: InferInput, values: Sequence[Any]) -> np.ndarray:
    """``tensor``'s array from typed values (flat, or nested exactly as the shape).

    Raises:
        InvalidArgument: ragged nesting, nesting other than the shape, another count of
            values than the shape holds, values of the wrong kind (strings for FP32, floats
            for INT32, numbers for BOOL or BYTES), or a value the datatype cannot hold (an
            integer out of range, a float beyond FP16/BF16/FP32's largest).
    """
    where, dtype, shape = _header(tensor)
    text = tensor.datatype == "BYTES"
    try:  # BYTES as objects: numpy's fixed-width strings would drop trailing NULs
        array = np.array(values, dtype=object if text else None)
    except (ValueError, OverflowError) as exc:
        raise _ragged(where, shape, f" ({exc})") from None
    if text and any(isinstance(value, (list, tuple)) for value in array.reshape(-1)):
        raise _ragged(where, shape, "")
    count = math.prod(shape)
    if array.ndim > 1 and array.shape != shape:
        raise InvalidArgument(
            f"{where}: the data is nested as {list(array.shape)}, but shape is "
            f"{list(shape)}; nest it as the shape or send it flat"
        )
    if array.size != count:
        raise InvalidArgument(
            f"{where}: the data holds {array.size} values, but shape {list(shape)} needs {count}"
        )
    if text:
        return _object_array([_text_element(value, where) for value in array.reshape(-1)], shape)
    kind = "f" if is_floating(dtype) else dtype.kind  # BF16 (bfloat16) is numpy kind "V"
    if array.size and array.dtype.kind not in ACCEPTED_KINDS[kind]:
        held = HELD.get(array.dtype.kind, "values of mixed JSON types")
        raise InvalidArgument(
            f"{where}: the data holds {held}, but {tensor.datatype} takes {KIND_NAMES[kind]}"
        )
    try:  # the one narrowing rule; the index it names is the tensor's, however nested
        return cast_checked(array.reshape(shape), dtype, where)
    except InputError as exc:
        raise InvalidArgument(exc.message) from None


def to_raw(array: np.ndarray) -> bytes:
    """An array's raw bytes (little-endian, row-major; BYTES length-prefixed, ``str``
    elements UTF-8 encoded; BF16 as 2-byte words)."""
    if from_numpy(array.dtype) == "BYTES":
        return encode_bytes([_as_bytes(value) for value in array.reshape(-1)])
    return np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()


def raw_view(array: np.ndarray) -> bytes | memoryview:
    """:func:`to_raw`'s bytes, as a flat view of the array's own memory when they are the
    same (a little-endian, C-contiguous array of a fixed-size datatype: nothing is copied,
    e.g. for an output written to shared memory); BYTES are encoded as by :func:`to_raw`."""
    if from_numpy(array.dtype) == "BYTES":
        return to_raw(array)
    flat = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).reshape(-1)
    return flat.view(np.uint8).data


def to_values(name: str, array: np.ndarray) -> Any:
    """An output's values for JSON, flat: numbers (BF16 widened exactly to FP32; a numpy
    array, for orjson), BYTES as UTF-8 strings.

    Raises:
        InvalidArgument: BYTES that are not UTF-8, which JSON cannot carry.
    """
    flat = np.ascontiguousarray(array).reshape(-1)
    datatype = from_numpy(array.dtype)
    if datatype == "BF16":  # every bfloat16 is exactly an FP32
        return flat.astype(np.float32)
    if datatype != "BYTES":
        return flat
    try:
        return [_as_bytes(value).decode() for value in flat]
    except UnicodeDecodeError:
        raise InvalidArgument(
            f"output {name!r} holds bytes that are not UTF-8, which JSON cannot carry; "
            "request it as binary data (HTTP parameters.binary_data: true)"
        ) from None


def decode_bytes(raw: bytes | memoryview, count: int, where: str) -> list[bytes]:
    """Split raw BYTES into ``count`` elements (4-byte little-endian length, then that many
    bytes; empty elements allowed).

    Raises:
        InvalidArgument: a length prefix is cut short or claims more bytes than follow,
            fewer than ``count`` elements are present, or bytes are left over.
    """
    elements: list[bytes] = []
    offset = 0
    view = memoryview(raw)
    for index in range(count):
        if offset + LENGTH_PREFIX.size > len(view):
            raise InvalidArgument(
                f"{where}: BYTES element {index} of {count} is missing "
                f"(only {len(view) - offset} bytes left at offset {offset}, "
                "a 4-byte length prefix is needed)"
            )
        (length,) = LENGTH_PREFIX.unpack_from(view, offset)
        offset += LENGTH_PREFIX.size
        if offset + length > len(view):
            raise InvalidArgument(
                f"{where}: BYTES element {index} claims {length} bytes but "
                f"only {len(view) - offset} follow its length prefix"
            )
        elements.append(bytes(view[offset : offset + length]))
        offset += length
    if offset != len(view):
        raise InvalidArgument(
            f"{where}: {len(view) - offset} bytes left after the {count} "
            "BYTES elements the shape calls for"
        )
    return elements


def encode_bytes(elements: Sequence[bytes]) -> bytes:
    """Join BYTES elements as raw bytes: each a 4-byte little-endian length + its bytes."""
    return b"".join(LENGTH_PREFIX.pack(len(element)) + element for element in elements)


def _header(tensor: InferInput) -> tuple[str, np.dtype, tuple[int, ...]]:
    where = f"input {tensor.name!r}"
    dtype = numpy_dtype(tensor.datatype, where)
    if any(dim < 0 for dim in tensor.shape):
        raise InvalidArgument(
            f"{where}: shape {list(tensor.shape)} has a negative dim; a request states the "
            "concrete size of every axis"
        )
    return where, dtype, tuple(tensor.shape)


def _ragged(where: str, shape: tuple[int, ...], detail: str) -> InvalidArgument:
    return InvalidArgument(
        f"{where}: the data is ragged or nested deeper than shape {list(shape)}{detail}"
    )


def _text_element(value: object, where: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    held = {bool: "booleans", int: "integers", float: "floats"}.get(type(value), "non-strings")
    raise InvalidArgument(f"{where}: the data holds {held}, but BYTES takes strings")


def _object_array(elements: list[bytes], shape: tuple[int, ...]) -> np.ndarray:
    array = np.empty(len(elements), dtype=object)
    array[:] = elements
    return array.reshape(shape)


def _as_bytes(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    return str(value).encode()
