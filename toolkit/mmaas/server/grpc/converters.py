"""KServe v2 gRPC messages <-> the protocol layer's neutral types: :func:`to_request` reads
a ``ModelInferRequest``, :func:`from_response` writes a ``ModelInferResponse`` (Triton's
``grpc_service.proto``; the tensors' bytes and values are the shared codec's,
:mod:`mmaas.server.protocol.codec`), and :class:`MessageExchange` hands them to the data
plane.

The rules only this wire has are kept here: ``raw_input_contents`` entries pair, in
order, with the inputs not in shared memory (one each, or none at all: then those inputs
have typed ``contents``), as Triton pairs them; typed values go in the ``contents`` field
of their datatype (:data:`CONTENTS_FIELD`: FP16 has none, BF16 travels in
``fp32_contents``); outputs always travel in ``raw_output_contents``, one entry each (empty
for one written to shared memory), as Triton sends them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mmaas.server.protocol.codec import numpy_dtype, to_raw
from mmaas.server.protocol.shm import TensorRef, tensor_ref
from mmaas.server.protocol.stubs import grpc_service_pb2 as service_pb2
from mmaas.server.protocol.types import (
    RAW,
    SHARED,
    VALUES,
    InferInput,
    InferRequest,
    InferResponse,
    Param,
    RawBytes,
    RequestedOutput,
    Source,
    Values,
    one_source,
)
from mmaas.server.repository import ServedModel
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


def to_parameters(parameters: Mapping[str, Any]) -> dict[str, Param]:
    """KServe v2 ``map<string, InferParameter>`` -> ``{key: bool | int | float | str}``
    (the set ``parameter_choice``; None when none is set)."""
    plain: dict[str, Param] = {}
    for key, value in parameters.items():
        choice = value.WhichOneof("parameter_choice")
        plain[key] = getattr(value, choice) if choice else None
    return plain


def to_request(message: Any, size: int) -> InferRequest:
    """The neutral request of a ``ModelInferRequest`` of ``size`` bytes on the wire.

    Raises:
        InvalidArgument: an unknown datatype, raw entries that do not pair with the inputs,
            an input with no data source or several, typed values in the wrong field (or
            for FP16), malformed shared memory parameters.
    """
    shared: dict[str, TensorRef] = {}
    parameters = [to_parameters(tensor.parameters) for tensor in message.inputs]
    for tensor, plain_parameters in zip(message.inputs, parameters, strict=True):
        numpy_dtype(tensor.datatype, f"input {tensor.name!r}")
        ref = tensor_ref(plain_parameters, f"input {tensor.name!r}")
        if ref is not None:
            shared[tensor.name] = ref
    raw = message.raw_input_contents
    plain = [tensor for tensor in message.inputs if tensor.name not in shared]
    if raw and len(raw) != len(plain):
        held = f" (and {len(shared)} in shared memory)" if shared else ""
        raise InvalidArgument(
            f"raw_input_contents has {len(raw)} entries for {len(plain)} inputs{held}; "
            "send one per input, in the order of inputs, or use typed contents for all"
        )
    entries = iter(raw)
    inputs = []
    for tensor, tensor_parameters in zip(message.inputs, parameters, strict=True):
        given: dict[str, Source | None] = {}
        if tensor.name in shared:
            given[SHARED] = shared[tensor.name]
        elif raw:
            given[RAW] = RawBytes(next(entries))
        if tensor.HasField("contents"):
            given[VALUES] = None  # read once it is known to be the only source
        source = given[one_source(tensor.name, list(given))]
        data = source if source is not None else Values(_typed_values(tensor))
        inputs.append(
            InferInput(
                tensor.name,
                tensor.datatype,
                tuple(tensor.shape),
                data,
                tensor_parameters,
            )
        )
    return InferRequest(
        id=message.id,
        inputs=inputs,
        outputs=[_output(tensor) for tensor in message.outputs],
        parameters=to_parameters(message.parameters),
        size=size,
    )


def from_response(response: InferResponse) -> Any:
    """The ``ModelInferResponse`` of ``response``: every output's datatype and shape, its
    bytes in ``raw_output_contents`` (an empty entry when it went to shared memory)."""
    message = service_pb2.ModelInferResponse(
        model_name=response.model_name, model_version=response.model_version, id=response.id
    )
    for output in response.outputs:
        message.outputs.add(name=output.name, datatype=output.datatype, shape=output.shape)
        message.raw_output_contents.append(b"" if output.data is None else to_raw(output.data))
    return message


@dataclass
class MessageExchange:
    """A ``ModelInferRequest`` (``size`` bytes on the wire) as the data plane reads it, and
    its ``ModelInferResponse`` (:class:`mmaas.server.dataplane.Exchange`)."""

    message: Any
    size: int

    async def read(self, model: ServedModel) -> InferRequest:
        """:func:`to_request` of the message (the model is not needed to read it)."""
        return to_request(self.message, self.size)

    def write(self, model: ServedModel, request: InferRequest, response: InferResponse) -> Any:
        """:func:`from_response`."""
        return from_response(response)


def _typed_values(tensor: Any) -> Sequence[Any]:
    where = f"input {tensor.name!r}"
    field = CONTENTS_FIELD[tensor.datatype]
    if field is None:
        raise InvalidArgument(
            f"{where}: {tensor.datatype} has no typed contents field in KServe v2; "
            "send it in raw_input_contents"
        )
    present = [descriptor.name for descriptor, _ in tensor.contents.ListFields()]
    if present and present != [field]:
        raise InvalidArgument(
            f"{where}: {tensor.datatype} data goes in contents.{field}, "
            f"got contents.{', contents.'.join(present)}"
        )
    values: Sequence[Any] = getattr(tensor.contents, field)
    return values


def _output(tensor: Any) -> RequestedOutput:
    parameters = to_parameters(tensor.parameters)
    return RequestedOutput(
        tensor.name, parameters, tensor_ref(parameters, f"output {tensor.name!r}")
    )
