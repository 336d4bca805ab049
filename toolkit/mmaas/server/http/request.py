"""The body of a KServe v2 REST ``/infer`` request: its JSON header (KServe v2
``$inference_request``: ``id``, ``parameters``, ``inputs``, ``outputs``) and, with Triton's
binary tensor data extension (``server/docs/protocol/extension_binary_data.md``), the
bytes after it: the JSON header is the first ``Inference-Header-Content-Length`` bytes of
the body. Parsing checks every member's JSON type and raises
:class:`~mmaas.server.status.InvalidArgument` naming it; the tensors' data are decoded
later (:mod:`.tensors`), after the request path has checked names, datatypes and shapes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import orjson

from mmaas.core.datatypes import NUMPY_BY_DATATYPE
from mmaas.core.manifest import ModelInfo
from mmaas.server.grpc.converters import encode_bytes
from mmaas.server.shm import TensorRef, tensor_ref
from mmaas.server.status import InvalidArgument

HEADER = "Inference-Header-Content-Length"


@dataclass(frozen=True)
class InputTensor:
    """One input of a request as the JSON header describes it; ``data`` is the JSON
    ``data`` member or None."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    parameters: dict[str, Any]
    data: Any = None


@dataclass(frozen=True)
class OutputTensor:
    """One requested output: its name, whether it comes back binary, its parameters."""

    name: str
    binary: bool
    parameters: dict[str, Any] = field(default_factory=dict)
    ref: TensorRef | None = None  # its system shared memory region, if it names one


@dataclass(frozen=True)
class InferBody:
    """A parsed ``/infer`` body: the request ``id`` and ``parameters``, its inputs, the
    requested outputs, the default for outputs it does not list (``binary_data_output``)
    and the bytes after the JSON header (``binary``)."""

    id: str
    parameters: dict[str, Any]
    inputs: list[InputTensor]
    outputs: list[OutputTensor]
    binary_output: bool
    binary: memoryview

    @property
    def headers(self) -> list[tuple[str, str, tuple[int, ...]]]:
        """``(name, datatype, shape)`` of every input, for the signature checks."""
        return [(t.name, t.datatype, t.shape) for t in self.inputs]


def header_length(value: str | None, body_size: int) -> int | None:
    """The JSON header's byte length from ``Inference-Header-Content-Length`` (None when
    the header is absent: the whole body is JSON).

    Raises:
        InvalidArgument: not an integer, or outside 0..``body_size``.
    """
    if value is None:
        return None
    try:
        length = int(value.strip())
    except ValueError:
        raise InvalidArgument(f"Unable to parse {HEADER}, got: {value!r}") from None
    if not 0 <= length <= body_size:
        raise InvalidArgument(
            f"{HEADER} is {length}, but the body holds {body_size} bytes: it must be the "
            f"byte length of the JSON header at the start of the body (0..{body_size})"
        )
    return length


def parse_body(body: bytes, json_length: int | None) -> InferBody:
    """Parse the JSON header (the first ``json_length`` bytes, or all of ``body``).

    Raises:
        InvalidArgument: invalid JSON, or a member of the wrong type or missing.
    """
    text = body if json_length is None else memoryview(body)[:json_length]
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        hint = "" if json_length is not None else f" (binary tensor data needs the {HEADER} header)"
        raise InvalidArgument(f"the request body is not valid JSON: {exc}{hint}") from None
    if not isinstance(document, dict):
        raise InvalidArgument(
            f"the request JSON must be an object with 'inputs', got {type(document).__name__}"
        )
    parameters = _object(document.get("parameters"), "parameters")
    binary_output = parameters.get("binary_data_output", False)
    if not isinstance(binary_output, bool):
        raise InvalidArgument("parameters.binary_data_output must be true or false")
    request_id = document.get("id", "")
    if not isinstance(request_id, str):
        raise InvalidArgument(f"id must be a string, got {request_id!r}")
    inputs = document.get("inputs")
    if not isinstance(inputs, list):
        raise InvalidArgument("the request JSON has no 'inputs' array")
    outputs = _list(document.get("outputs"), "outputs")
    return InferBody(
        id=request_id,
        parameters=parameters,
        inputs=[_input(item, index) for index, item in enumerate(inputs)],
        outputs=[_output(item, index, binary_output) for index, item in enumerate(outputs)],
        binary_output=binary_output,
        binary=memoryview(body)[len(body) if json_length is None else json_length :],
    )


def raw_body(info: ModelInfo, body: bytes) -> InferBody:
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
            f"a raw binary request ({HEADER}: 0) needs a model with one input; "
            f"{info.name!r} takes {len(info.inputs)}: send a JSON header describing them"
        )
    tensor = info.inputs[0]
    shape = [
        1 if axis == 0 and info.max_batch_size > 0 else dim for axis, dim in enumerate(tensor.shape)
    ]
    if tensor.datatype == "BYTES":
        shape = [1 if dim < 0 else dim for dim in shape]
        body = encode_bytes([body])
    dynamic = [axis for axis, dim in enumerate(shape) if dim < 0]
    if len(dynamic) > 1:
        raise InvalidArgument(
            f"a raw binary request ({HEADER}: 0) cannot tell the shape of input "
            f"{tensor.name!r} {list(tensor.shape)}: it has {len(dynamic)} dynamic dims "
            "besides the batch axis; send a JSON header with the shape"
        )
    if dynamic:
        known = (
            math.prod(dim for dim in shape if dim >= 0)
            * NUMPY_BY_DATATYPE[tensor.datatype].itemsize
        )
        if not known or len(body) % known:
            raise InvalidArgument(
                f"a raw binary request of {len(body)} bytes does not fill input "
                f"{tensor.name!r} {list(tensor.shape)} of {tensor.datatype} ({known} bytes "
                "per step of its dynamic dim)"
            )
        shape[dynamic[0]] = len(body) // known
    parameters = {"binary_data_size": len(body)}
    return InferBody(
        id="",
        parameters={},
        inputs=[InputTensor(tensor.name, tensor.datatype, tuple(shape), parameters)],
        outputs=[],
        binary_output=True,
        binary=memoryview(body),
    )


def _input(item: Any, index: int) -> InputTensor:
    if not isinstance(item, dict):
        raise InvalidArgument(f"inputs[{index}] must be an object with name, datatype, shape")
    name = item.get("name")
    if not isinstance(name, str):
        raise InvalidArgument(f"inputs[{index}] has no 'name' string")
    datatype = item.get("datatype")
    if not isinstance(datatype, str) or datatype not in NUMPY_BY_DATATYPE:
        raise InvalidArgument(
            f"input {name!r}: datatype {datatype!r} is not a KServe v2 datatype "
            f"({', '.join(NUMPY_BY_DATATYPE)})"
        )
    shape = item.get("shape")
    if not isinstance(shape, list) or not all(type(dim) is int for dim in shape):
        raise InvalidArgument(
            f"input {name!r}: shape must be a JSON array of integers, got {shape!r:.40}"
        )
    parameters = _object(item.get("parameters"), f"input {name!r}: parameters")
    return InputTensor(name, datatype, tuple(shape), parameters, item.get("data"))


def _output(item: Any, index: int, default_binary: bool) -> OutputTensor:
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
    return OutputTensor(name, binary, parameters, ref)


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
