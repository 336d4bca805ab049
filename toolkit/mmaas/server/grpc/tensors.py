"""The tensors of a ModelInferRequest / ModelInferResponse with their parameters: inputs
from ``raw_input_contents``, typed ``contents`` or system shared memory, outputs to
``raw_output_contents`` or shared memory (Triton's shared-memory extension over gRPC,
``src/grpc/infer_handler.cc``). The byte work is :mod:`.converters` and
:mod:`mmaas.server.shm`; this module pairs them with the request's parameters.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mmaas.server.grpc.converters import from_array, to_inputs
from mmaas.server.shm import SystemSharedMemory, TensorRef, tensor_ref
from mmaas.server.status import InvalidArgument

Param = bool | int | float | str | None
UNSUPPORTED_OUTPUT_PARAMETERS = {
    "classification": "the classification extension is not supported; request the tensor",
}


@dataclass(frozen=True)
class DecodedRequest:
    """A request's input arrays, the shared memory places of the outputs that go there,
    and the request's own parameters (plain values)."""

    arrays: dict[str, np.ndarray]
    output_refs: dict[str, TensorRef]
    parameters: dict[str, Param]


def to_parameters(parameters: Mapping[str, Any]) -> dict[str, Param]:
    """KServe v2 ``map<string, InferParameter>`` -> ``{key: bool | int | float | str}``
    (the set ``parameter_choice``; None when none is set)."""
    plain: dict[str, Param] = {}
    for key, value in parameters.items():
        choice = value.WhichOneof("parameter_choice")
        plain[key] = getattr(value, choice) if choice else None
    return plain


def decode_request(request: Any, shm: SystemSharedMemory) -> DecodedRequest:
    """Decode ``request``'s inputs (shared memory ones read in place, no copy) and check
    the shared memory places of its outputs before anything is computed.

    Raises:
        InvalidArgument: a malformed tensor or shared memory parameter, a range past its
            region, an unsupported output parameter. NotFound: an unknown region.
    """
    shared: dict[str, tuple[memoryview, str]] = {}
    for tensor in request.inputs:
        where = f"input {tensor.name!r}"
        ref = tensor_ref(to_parameters(tensor.parameters), where)
        if ref is not None:
            source = f"shared memory region {ref.region!r} (shared_memory_byte_size)"
            shared[tensor.name] = (shm.read(ref, where), source)
    output_refs: dict[str, TensorRef] = {}
    for tensor in request.outputs:
        where = f"output {tensor.name!r}"
        parameters = to_parameters(tensor.parameters)
        for key, why in UNSUPPORTED_OUTPUT_PARAMETERS.items():
            if key in parameters:
                raise InvalidArgument(f"{where}: parameter {key!r}: {why}")
        ref = tensor_ref(parameters, where)
        if ref is not None:
            shm.check(ref, where)
            output_refs[tensor.name] = ref
    arrays = to_inputs(request.inputs, request.raw_input_contents, shared)
    return DecodedRequest(arrays, output_refs, to_parameters(request.parameters))


def encode_outputs(
    response: Any,
    arrays: Mapping[str, np.ndarray],
    refs: Mapping[str, TensorRef],
    shm: SystemSharedMemory,
) -> None:
    """Append each array to ``response`` as an output tensor with one
    ``raw_output_contents`` entry each: its data, or empty for an output written to its
    shared memory place (clients index the entries by output, Triton sends one for every
    output). Every shared memory output is checked before any is written.

    Raises:
        InvalidArgument: an output needs more bytes than its place holds (nothing written).
    """
    encoded = []
    for name, array in arrays.items():
        raw = from_array(response.outputs.add(name=name), array)
        assert raw is not None
        ref = refs.get(name)
        if ref is not None:
            shm.check(ref, f"output {name!r}", len(raw))
        encoded.append((raw, ref))
    for raw, ref in encoded:
        if ref is None:
            response.raw_output_contents.append(raw)
        else:
            shm.write(ref, raw, "output")  # checked above: cannot fail half-way
            response.raw_output_contents.append(b"")
