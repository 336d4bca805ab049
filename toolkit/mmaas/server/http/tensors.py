"""KServe v2 JSON tensors and Triton's binary tensor data extension <-> numpy arrays.

Wire format: KServe v2 REST ``$inference_request`` / ``$inference_response`` (tensors as
``{"name", "datatype", "shape", "data"}``, ``data`` flat or nested row-major) and Triton's
binary extension (``server/docs/protocol/extension_binary_data.md``): the JSON header is
the first ``Inference-Header-Content-Length`` bytes of the body, an input with
``parameters.binary_data_size`` takes that many of the bytes that follow (inputs in
order), an output is returned binary when it asks ``binary_data: true`` or the request
sets ``parameters.binary_data_output``; BYTES elements travel as a 4-byte little-endian
length + bytes (:func:`mmaas.server.grpc.converters.decode_bytes`), BOOL as one byte.
Every malformed request raises :class:`~mmaas.server.status.InvalidArgument` naming the
tensor and the field, before any allocation that its claims would size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson

from mmaas.core.datatypes import NUMPY_BY_DATATYPE, cast_checked, from_numpy, is_floating
from mmaas.core.errors import InputError
from mmaas.server.grpc.converters import decode_bytes, encode_bytes
from mmaas.server.http.request import HEADER, InferBody, InputTensor, OutputTensor
from mmaas.server.shm import SystemSharedMemory, tensor_ref
from mmaas.server.status import InvalidArgument

SOURCES = ("data", "binary_data_size", "shared_memory_region")
# numpy kinds a JSON array may hold for each kind of datatype (JSON numbers: int or float)
ACCEPTED_KINDS = {"f": "fiu", "i": "iu", "u": "iu", "b": "b"}
KIND_NAMES = {"f": "numbers", "i": "integers", "u": "integers", "b": "booleans"}


def decode_inputs(
    body: InferBody, has_header: bool, shm: SystemSharedMemory | None = None
) -> dict[str, np.ndarray]:
    """Each input's array from its one source: JSON ``data``, ``binary_data_size`` bytes
    of the binary part (in input order), or a system shared memory region (``shm``, the
    server's registry). ``has_header``: the request sent ``Inference-Header-Content-Length``.

    Raises:
        InvalidArgument: no source or several, sizes that disagree with the shape, binary
            data missing or left over, or ``data`` that does not fit the datatype/shape.
    """
    arrays: dict[str, np.ndarray] = {}
    offset = 0
    for tensor in body.inputs:
        if tensor.name in arrays:
            raise InvalidArgument(f"input {tensor.name!r} appears twice in inputs")
        given = [key for key in SOURCES if _given(tensor, key)]
        if len(given) != 1:
            raise InvalidArgument(
                f"input {tensor.name!r} must set exactly one of 'data', 'binary_data_size' in "
                f"'parameters', 'shared_memory_region' in 'parameters'; it sets "
                f"{', '.join(map(repr, given)) or 'none'}"
            )
        if given[0] == "data":
            arrays[tensor.name] = from_json(tensor)
        elif given[0] == "binary_data_size":
            if not has_header:
                raise InvalidArgument(
                    f"input {tensor.name!r} has binary_data_size but the request has no "
                    f"{HEADER} header: send the JSON header's byte length in it"
                )
            arrays[tensor.name], used = _from_binary(tensor, body.binary[offset:], offset)
            offset += used
        else:
            arrays[tensor.name] = _from_region(tensor, shm)
    if offset != len(body.binary):
        raise InvalidArgument(
            f"unexpected additional input data: {len(body.binary) - offset} bytes after the "
            "binary data of the inputs (the binary_data_size values add up to "
            f"{offset}; {HEADER} says where the binary part starts)"
        )
    return arrays


def from_array(tensor: InputTensor, raw: bytes | memoryview) -> np.ndarray:
    """An array of ``tensor``'s datatype and shape from its raw little-endian bytes.

    Raises:
        InvalidArgument: the byte count is not shape x element size (BYTES: malformed).
    """
    where = f"input {tensor.name!r}"
    count = math.prod(tensor.shape)
    if tensor.datatype == "BYTES":
        elements = decode_bytes(bytes(raw), count, where)
        return _objects(elements, tensor.shape)
    dtype = NUMPY_BY_DATATYPE[tensor.datatype]
    expected = count * dtype.itemsize
    if len(raw) != expected:
        raise InvalidArgument(
            f"unexpected size for {where}: shape {list(tensor.shape)} of {tensor.datatype} "
            f"needs {expected} bytes, got {len(raw)}"
        )
    return np.frombuffer(raw, dtype=dtype.newbyteorder("<")).reshape(tensor.shape)


def from_json(tensor: InputTensor) -> np.ndarray:
    """``tensor.data`` (flat, or nested exactly as the shape) as an array.

    Raises:
        InvalidArgument: ragged nesting, nesting other than the shape, another count of
            values than the shape holds, values of the wrong JSON type (strings for FP32,
            floats for INT32...), or a value the datatype cannot hold (an integer out
            of range, a float beyond FP16/BF16/FP32's largest: ``cast_checked``). BF16
            takes numbers, rounded to the nearest bfloat16.
    """
    where = f"input {tensor.name!r}"
    if not isinstance(tensor.data, list):
        raise InvalidArgument(f"{where}: data must be a JSON array, got {tensor.data!r:.40}")
    try:
        values = np.array(tensor.data)
    except (ValueError, OverflowError) as exc:
        raise InvalidArgument(
            f"{where}: data is ragged or nested deeper than shape {list(tensor.shape)} ({exc})"
        ) from None
    count = math.prod(tensor.shape)
    if values.ndim > 1 and values.shape != tensor.shape:
        raise InvalidArgument(
            f"{where}: data is nested as {list(values.shape)}, but shape is "
            f"{list(tensor.shape)}; nest it as the shape or send it flat"
        )
    if values.size != count:
        raise InvalidArgument(
            f"{where}: data holds {values.size} values, but shape {list(tensor.shape)} "
            f"needs {count}"
        )
    if tensor.datatype == "BYTES":
        return _bytes_from_json(values, tensor.shape, where)
    dtype = NUMPY_BY_DATATYPE[tensor.datatype]
    kind = "f" if is_floating(dtype) else dtype.kind  # BF16 (bfloat16) is numpy kind "V"
    if values.size and values.dtype.kind not in ACCEPTED_KINDS[kind]:
        raise InvalidArgument(
            f"{where}: data holds {_kind(values)}, but {tensor.datatype} takes {KIND_NAMES[kind]}"
        )
    try:  # the one narrowing rule: a value the datatype cannot hold is refused
        return cast_checked(values, dtype, f"{where}: data").reshape(tensor.shape)
    except InputError as exc:
        raise InvalidArgument(exc.message) from None


def encode_response(
    head: dict[str, Any], outputs: Sequence[tuple[OutputTensor, str, np.ndarray]]
) -> tuple[bytes, int | None]:
    """The response body: ``head`` (model_name, model_version, id...) plus each output
    ``(request, datatype, array)`` as JSON ``data`` or binary; returns the body and, when
    an output is binary, the JSON header's length (the response's ``HEADER``).

    Raises:
        InvalidArgument: a BYTES output holds bytes that are not UTF-8 and was asked as JSON.
    """
    documents, blobs = [], []
    for request, datatype, array in outputs:
        document: dict[str, Any] = {"name": request.name, "datatype": datatype}
        document["shape"] = list(array.shape)
        if request.ref is not None:
            pass  # written to its shared memory region: name, datatype and shape only
        elif request.binary:
            blob = raw_bytes(datatype, array)
            document["parameters"] = {"binary_data_size": len(blob)}
            blobs.append(blob)
        else:
            document["data"] = json_data(request.name, datatype, array)
        documents.append(document)
    header = orjson.dumps({**head, "outputs": documents}, option=orjson.OPT_SERIALIZE_NUMPY)
    if not blobs:
        return header, None
    return b"".join([header, *blobs]), len(header)


def output_datatype(declared: str | None, array: np.ndarray) -> str:
    """The datatype an output is reported with: the signature's, else the array's."""
    return declared or from_numpy(array.dtype)


def _given(tensor: InputTensor, key: str) -> bool:
    return tensor.data is not None if key == "data" else key in tensor.parameters


def _from_binary(tensor: InputTensor, rest: memoryview, offset: int) -> tuple[np.ndarray, int]:
    size = tensor.parameters["binary_data_size"]
    if type(size) is not int or size < 0:
        raise InvalidArgument(
            f"input {tensor.name!r}: binary_data_size must be a non-negative integer, got {size!r}"
        )
    if size > len(rest):
        raise InvalidArgument(
            f"input {tensor.name!r}: binary_data_size is {size} bytes, but only "
            f"{len(rest)} bytes of binary data follow at offset {offset} of the binary part"
        )
    return from_array(tensor, rest[:size]), size


def _from_region(tensor: InputTensor, shm: SystemSharedMemory | None) -> np.ndarray:
    where = f"input {tensor.name!r}"
    ref = tensor_ref(tensor.parameters, where)
    if shm is None or ref is None:
        raise InvalidArgument(f"{where}: shared memory is not served here; send the data")
    return from_array(tensor, shm.read(ref, where))


def _bytes_from_json(values: np.ndarray, shape: tuple[int, ...], where: str) -> np.ndarray:
    if values.size and values.dtype.kind != "U":
        raise InvalidArgument(f"{where}: data holds {_kind(values)}, but BYTES takes strings")
    return _objects([str(value).encode() for value in values.reshape(-1).tolist()], shape)


def _objects(elements: list[bytes], shape: tuple[int, ...]) -> np.ndarray:
    array = np.empty(len(elements), dtype=object)
    array[:] = elements
    return array.reshape(shape)


def _kind(values: np.ndarray) -> str:
    return {
        "f": "floats",
        "i": "integers",
        "u": "integers",
        "b": "booleans",
        "U": "strings",
    }.get(values.dtype.kind, "values of mixed JSON types")


def raw_bytes(datatype: str, array: np.ndarray) -> bytes:
    """An output's bytes as the binary extension and shared memory carry them
    (little-endian, row-major; BYTES as 4-byte length + bytes per element)."""
    if datatype == "BYTES":
        return encode_bytes([_element(value) for value in array.reshape(-1)])
    return np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()


def json_data(name: str, datatype: str, array: np.ndarray) -> Any:
    """An output's values as JSON: numbers (flat; BF16 widened exactly to FP32, non-finite
    floats become null: JSON has no NaN), BYTES as UTF-8 strings.

    Raises:
        InvalidArgument: BYTES that are not UTF-8.
    """
    flat = np.ascontiguousarray(array).reshape(-1)
    if datatype == "BF16":  # every bfloat16 is exactly an FP32
        return flat.astype(np.float32)
    if datatype != "BYTES":
        return flat
    try:
        return [_element(value).decode() for value in flat]
    except UnicodeDecodeError:
        raise InvalidArgument(
            f"output {name!r} holds bytes that are not UTF-8, which JSON cannot carry; "
            "request it with parameters.binary_data: true"
        ) from None


def _element(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    return str(value).encode()
