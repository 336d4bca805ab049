"""The body of a KServe v2 REST ``/infer`` request -> the protocol layer's
:class:`~mmaas.server.protocol.types.InferRequest`: its JSON header (KServe v2
``$inference_request``: ``id``, ``parameters``, ``inputs``, ``outputs``) and, with Triton's
binary tensor data extension (``server/docs/protocol/extension_binary_data.md``), the bytes
after it: the JSON header is the first ``Inference-Header-Content-Length`` bytes of the
body, and an input with ``parameters.binary_data_size`` takes that many of the bytes that
follow, inputs in order. An output travels binary when it asks ``binary_data: true`` or the
request sets ``parameters.binary_data_output``.

Only what this wire alone can get wrong is worded here (a JSON member of the wrong type, a
header length outside the body, binary data missing or left over); the tensors' data are
decoded later by the shared codec, after the request path has checked names, datatypes
and shapes. Every refusal raises :class:`~mmaas.server.status.InvalidArgument` naming the
member.
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from mmaas.core.datatypes import NUMPY_BY_DATATYPE
from mmaas.core.manifest import ModelInfo
from mmaas.server.http.binary_header import HEADER, header_note
from mmaas.server.protocol.codec import encode_bytes, numpy_dtype
from mmaas.server.protocol.shm import tensor_ref
from mmaas.server.protocol.types import (
    RAW,
    SHARED,
    VALUES,
    InferInput,
    InferRequest,
    RawBytes,
    RequestedOutput,
    Source,
    Values,
    one_source,
)
from mmaas.server.status import InvalidArgument

BINARY_OUTPUT = "binary_data_output"


def parse_body(body: bytes, json_length: int | None) -> InferRequest:
    """The request in ``body``: its JSON header (the first ``json_length`` bytes, or all of
    ``body``), each input with its one data source.

    Raises:
        InvalidArgument: invalid JSON, a member of the wrong type or missing, an input with
            no data source or several, binary data missing or left over.
    """
    text = body if json_length is None else memoryview(body)[:json_length]
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        if json_length is None:
            hint = f" (binary tensor data needs the {HEADER} header)"
            raise InvalidArgument(f"the request body is not valid JSON: {exc}{hint}") from None
        raise InvalidArgument(
            f"the first {json_length} bytes of the body ({header_note(json_length, len(body))})"
            f" are not one JSON object: {exc}; {HEADER} must be the JSON header's exact byte "
            "length (a smaller value cuts the JSON, a larger one runs into the binary data)"
        ) from None
    if not isinstance(document, dict):
        raise InvalidArgument(
            f"the request JSON must be an object with 'inputs', got {type(document).__name__}"
        )
    parameters = _object(document.get("parameters"), "parameters")
    binary_output = parameters.get(BINARY_OUTPUT, False)
    if not isinstance(binary_output, bool):
        raise InvalidArgument(f"parameters.{BINARY_OUTPUT} must be true or false")
    request_id = document.get("id", "")
    if not isinstance(request_id, str):
        raise InvalidArgument(f"id must be a string, got {request_id!r}")
    items = document.get("inputs")
    if not isinstance(items, list):
        raise InvalidArgument("the request JSON has no 'inputs' array")
    outputs = _list(document.get("outputs"), "outputs")
    binary = memoryview(body)[len(body) if json_length is None else json_length :]
    inputs, offset = [], 0
    for index, item in enumerate(items):
        tensor, used = _input(item, index, binary[offset:], offset, json_length is not None)
        inputs.append(tensor)
        offset += used
    if offset != len(binary):
        where = "" if json_length is None else f"; {header_note(json_length, len(body))}"
        raise InvalidArgument(
            f"unexpected additional input data: {len(binary) - offset} bytes after the "
            "binary data of the inputs (the binary_data_size values add up to "
            f"{offset}; {HEADER} says where the binary part starts{where})"
        )
    return InferRequest(
        id=request_id,
        inputs=inputs,
        outputs=[_output(item, index, binary_output) for index, item in enumerate(outputs)],
        parameters=parameters,
        size=len(body),
    )


def raw_body(info: ModelInfo, body: bytes) -> InferRequest:
    """A raw binary request (``Inference-Header-Content-Length: 0``, Triton's "Raw Binary
    Request"): the body is the data of the model's one input, batch 1 (when it batches),
    every output returned binary. The shape is the declared one with the batch axis 1 and
    at most one other dynamic dim, derived from the byte count; a BYTES body is one element.

    Raises:
        InvalidArgument: the model has several inputs, more than one dynamic dim besides
            the batch axis, or the byte count does not divide into the shape.
    """
    if len(info.inputs) != 1:
        raise InvalidArgument(
            f"a raw binary request ({header_note(0, len(body))}) needs a model with one input; "
            f"{info.name!r} takes {len(info.inputs)}: send a JSON header describing them"
        )
    tensor = info.inputs[0]
    shape = [
        1 if axis == 0 and info.max_batch_size > 0 else dim for axis, dim in enumerate(tensor.shape)
    ]
    data = body
    if tensor.datatype == "BYTES":
        shape = [1 if dim < 0 else dim for dim in shape]
        data = encode_bytes([body])
    dynamic = [axis for axis, dim in enumerate(shape) if dim < 0]
    if len(dynamic) > 1:
        raise InvalidArgument(
            f"a raw binary request ({header_note(0, len(body))}) cannot tell the shape of input "
            f"{tensor.name!r} {list(tensor.shape)}: it has {len(dynamic)} dynamic dims "
            "besides the batch axis; send a JSON header with the shape"
        )
    if dynamic:
        step = (
            math.prod(dim for dim in shape if dim >= 0)
            * NUMPY_BY_DATATYPE[tensor.datatype].itemsize
        )
        if not step or len(data) % step:
            raise InvalidArgument(
                f"a raw binary request ({header_note(0, len(body))}) does not fill input "
                f"{tensor.name!r} {list(tensor.shape)} of {tensor.datatype} ({step} bytes "
                "per step of its dynamic dim)"
            )
        shape[dynamic[0]] = len(data) // step
    raw = InferInput(tensor.name, tensor.datatype, tuple(shape), RawBytes(data))
    return InferRequest(id="", inputs=[raw], parameters={BINARY_OUTPUT: True}, size=len(body))


def _input(
    item: Any, index: int, rest: memoryview, offset: int, has_header: bool
) -> tuple[InferInput, int]:
    """Input ``index`` of the JSON header and how many bytes of the binary part it takes
    (``rest``: the binary part from ``offset`` on)."""
    if not isinstance(item, dict):
        raise InvalidArgument(f"inputs[{index}] must be an object with name, datatype, shape")
    name = item.get("name")
    if not isinstance(name, str):
        raise InvalidArgument(f"inputs[{index}] has no 'name' string")
    where = f"input {name!r}"
    datatype = item.get("datatype")
    numpy_dtype(datatype, where)
    shape = item.get("shape")
    if not isinstance(shape, list) or not all(type(dim) is int for dim in shape):
        raise InvalidArgument(f"{where}: shape must be a JSON array of integers, got {shape!r:.40}")
    parameters = _object(item.get("parameters"), f"{where}: parameters")
    ref, data = tensor_ref(parameters, where), item.get("data")
    sent = {
        VALUES: data is not None,
        RAW: "binary_data_size" in parameters,
        SHARED: ref is not None,
    }
    kind, used = one_source(name, [source for source, given in sent.items() if given]), 0
    source: Source
    if kind == VALUES:
        if not isinstance(data, list):
            raise InvalidArgument(f"{where}: data must be a JSON array, got {data!r:.40}")
        source = Values(data)
    elif kind == RAW:
        used = _binary_size(name, parameters["binary_data_size"], rest, offset, has_header)
        source = RawBytes(rest[:used])
    else:
        assert ref is not None
        source = ref
    return InferInput(name, str(datatype), tuple(shape), source, parameters), used


def _binary_size(name: str, size: Any, rest: memoryview, offset: int, has_header: bool) -> int:
    if not has_header:
        raise InvalidArgument(
            f"input {name!r} has binary_data_size but the request has no {HEADER} header: "
            "send the JSON header's byte length in it"
        )
    if type(size) is not int or size < 0:
        raise InvalidArgument(
            f"input {name!r}: binary_data_size must be a non-negative integer, got {size!r}"
        )
    if size > len(rest):
        raise InvalidArgument(
            f"input {name!r}: binary_data_size is {size} bytes, but only {len(rest)} bytes "
            f"of binary data follow at offset {offset} of the binary part"
        )
    return size


def _output(item: Any, index: int, default_binary: bool) -> RequestedOutput:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        raise InvalidArgument(f"outputs[{index}] must be an object with a 'name' string")
    name = item["name"]
    parameters = _object(item.get("parameters"), f"output {name!r}: parameters")
    binary = parameters.get("binary_data", default_binary)
    if not isinstance(binary, bool):
        raise InvalidArgument(f"output {name!r}: parameters.binary_data must be true or false")
    ref = tensor_ref(parameters, f"output {name!r}")
    if ref is not None:
        if parameters.get("binary_data") is True:
            raise InvalidArgument(
                f"output {name!r} can't set both 'shared_memory_region' and 'binary_data'"
            )
        binary = False  # the region receives the data (Triton: only an explicit true clashes)
    return RequestedOutput(name, parameters, ref, binary)


def _object(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidArgument(f"{where} must be a JSON object, got {value!r:.40}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidArgument(f"{where} must be a JSON array, got {value!r:.40}")
    return value
