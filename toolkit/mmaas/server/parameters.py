"""A request's own ``parameters`` (KServe v2 ``$inference_request.parameters``, gRPC
``ModelInferRequest.parameters``): every one is honoured or refused, never ignored.

* ``binary_data_output``: HTTP ``/infer``'s outputs travel as binary data;
* ``triton_enable_empty_final_response``: gRPC ``ModelStreamInfer`` sends the empty final
  response;
* the name of an input of the model: that input's value (``max_tokens: 3`` or
  ``stop: "."`` for a generation model), shaped ``[1, ..., 1]`` to the input's rank,
  exactly as if it were sent as a tensor; refused when the request also sends that input;
* anything else (``sequence_id``, ``priority``, ``timeout``, a misspelt name...):
  INVALID_ARGUMENT naming it, the inputs and the parameters this server reads.

HTTP ``/generate`` reads its ``parameters`` object the same way (every key names an input).
"""

from __future__ import annotations

from dataclasses import replace

from mmaas.core.manifest import ModelInfo
from mmaas.server.protocol.types import InferInput, InferRequest, Values
from mmaas.server.status import InvalidArgument

WIRE = ("binary_data_output", "triton_enable_empty_final_response")


def with_parameters(info: ModelInfo, request: InferRequest) -> InferRequest:
    """``request`` with each parameter that names an input of ``info`` turned into that
    input (the wire's own parameters stay where they are).

    Raises:
        InvalidArgument: a parameter that is neither, one whose value is null, or one
            naming an input the request also sends as a tensor.
    """
    if not request.parameters:
        return request
    declared = {tensor.name: tensor for tensor in info.inputs}
    sent = {tensor.name for tensor in request.inputs}
    extra: list[InferInput] = []
    for name, value in request.parameters.items():
        if name in WIRE:
            continue
        tensor = declared.get(name)
        if tensor is None:
            raise InvalidArgument(
                f"unknown request parameter {name!r}: this server reads {', '.join(WIRE)} and "
                f"the inputs of model {info.name!r} ({', '.join(declared)}) as parameters; "
                "anything else is refused rather than ignored"
            )
        if name in sent:
            raise InvalidArgument(
                f"input {name!r} is sent both as a tensor and as a request parameter; send it once"
            )
        if value is None:
            raise InvalidArgument(f"request parameter {name!r} has no value")
        shape = (1,) * max(len(tensor.shape), 1)
        extra.append(InferInput(name, tensor.datatype, shape, Values([value])))
    if not extra:
        return request
    return replace(request, inputs=[*request.inputs, *extra])
