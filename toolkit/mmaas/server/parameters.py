"""A request's own ``parameters`` (KServe v2 ``$inference_request.parameters``, gRPC
``ModelInferRequest.parameters``): every one is honoured or refused, never ignored.

* ``binary_data_output``: HTTP ``/infer``'s outputs travel as binary data;
* ``triton_enable_empty_final_response``: gRPC ``ModelStreamInfer`` sends the empty final
  response;
* ``timeout`` (Triton's request timeout, microseconds, a non-negative integer; 0 = none):
  the request's deadline, the tighter of it and the wire's own (gRPC deadline), with the
  same DEADLINE_EXCEEDED when it passes while the request is queued (:func:`deadline_of`);
* ``priority`` (Triton's request priority, a non-negative integer): accepted and not used,
  as Triton's scheduler does for a model without priority levels (no model here has any);
* the name of an input of the model: that input's value (``max_tokens: 3`` or
  ``stop: "."`` for a generation model), shaped ``[1, ..., 1]`` to the input's rank,
  exactly as if it were sent as a tensor; refused when the request also sends that input;
* anything else (``sequence_id``, a misspelt name...):
  INVALID_ARGUMENT naming it, the inputs and the parameters this server reads.

HTTP ``/generate`` reads its ``parameters`` object the same way (every key names an input).
"""

from __future__ import annotations

from dataclasses import replace

from mmaas.core.manifest import ModelInfo
from mmaas.server.protocol.types import InferInput, InferRequest, Values
from mmaas.server.status import InvalidArgument

WIRE = ("binary_data_output", "triton_enable_empty_final_response")
SCHEDULING = ("timeout", "priority")
MICROSECONDS = 1e-6


def deadline_of(request: InferRequest, deadline_s: float | None) -> float | None:
    """Seconds ``request`` may still wait: the tighter of the wire's ``deadline_s`` (None =
    none) and its ``timeout`` parameter (microseconds; absent or 0 = none), already
    checked by :func:`with_parameters`."""
    timeout = request.parameters.get("timeout")
    if not isinstance(timeout, int) or timeout <= 0:
        return deadline_s
    timeout_s = timeout * MICROSECONDS
    return timeout_s if deadline_s is None else min(deadline_s, timeout_s)


def _check_scheduling(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        unit = " in microseconds" if name == "timeout" else ""
        raise InvalidArgument(
            f"request parameter {name!r} must be a non-negative integer{unit}, got {value!r}"
        )


def with_parameters(info: ModelInfo, request: InferRequest) -> InferRequest:
    """``request`` with each parameter that names an input of ``info`` turned into that
    input (the wire's own parameters and the scheduling ones stay where they are).

    Raises:
        InvalidArgument: a parameter that is neither, one whose value is null, one
            naming an input the request also sends as a tensor, a ``timeout`` or
            ``priority`` that is not a non-negative integer.
    """
    if not request.parameters:
        return request
    declared = {tensor.name: tensor for tensor in info.inputs}
    sent = {tensor.name for tensor in request.inputs}
    extra: list[InferInput] = []
    for name, value in request.parameters.items():
        if name in WIRE:
            continue
        if name in SCHEDULING:
            _check_scheduling(name, value)
            continue
        tensor = declared.get(name)
        if tensor is None:
            raise InvalidArgument(
                f"unknown request parameter {name!r}: this server reads "
                f"{', '.join(WIRE + SCHEDULING)} and "
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
