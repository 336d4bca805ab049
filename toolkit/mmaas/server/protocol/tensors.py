"""The codec applied to a whole request or response: every input's array from its one data
source (system shared memory read in place; CUDA shared memory handed on as a device
array), the requested outputs' wishes checked before anything is computed, and the
outputs of a response with those bound for shared memory (system or CUDA) written there
(Triton's shared-memory extension, ``src/grpc/infer_handler.cc`` and
``src/http_server.cc``: the same rules over either protocol).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mmaas.core.cuda import DeviceArray
from mmaas.core.datatypes import from_numpy
from mmaas.server.protocol.codec import from_device, from_raw, from_values, raw_view
from mmaas.server.protocol.memory import MemoryLease, Output
from mmaas.server.protocol.shm import TensorRef
from mmaas.server.protocol.types import InferInput, InferRequest, OutputTensor, RawBytes, Values
from mmaas.server.status import InvalidArgument

UNSUPPORTED_OUTPUT_PARAMETERS = {
    "classification": "the classification extension is not supported; request the tensor",
}


def decode_inputs(request: InferRequest, shm: MemoryLease) -> dict[str, Any]:
    """``{name: array}`` of the request's inputs, in order (system shared memory ones read
    in place, no copy; CUDA shared memory ones as :class:`DeviceArray`; raw bytes without
    a copy for fixed-size datatypes).

    Raises:
        InvalidArgument: an input name repeats, or a tensor is malformed (:mod:`.codec`).
        NotFound: an unknown shared memory region.
    """
    arrays: dict[str, Any] = {}
    for tensor in request.inputs:
        if tensor.name in arrays:
            raise InvalidArgument(f"input {tensor.name!r} appears twice in inputs")
        arrays[tensor.name] = to_array(tensor, shm)
    return arrays


def to_array(tensor: InferInput, shm: MemoryLease) -> np.ndarray | DeviceArray:
    """One input's array from its data source (see :func:`decode_inputs`)."""
    data = tensor.data
    if isinstance(data, Values):
        return from_values(tensor, data.values)
    if isinstance(data, RawBytes):
        return from_raw(tensor, data.data)
    source = f" in shared memory region {data.region!r}"
    raw = shm.read(data, f"input {tensor.name!r}")
    if isinstance(raw, DeviceArray):
        return from_device(tensor, raw, source)
    return from_raw(tensor, raw, source)


def check_outputs(request: InferRequest, shm: MemoryLease) -> dict[str, TensorRef]:
    """The shared memory place of every requested output that names one, each checked
    against its region, and no unsupported output parameter: before anything is computed.

    Raises:
        InvalidArgument: an unsupported output parameter, a range past its region's end.
        NotFound: an unknown region.
    """
    refs: dict[str, TensorRef] = {}
    for output in request.outputs:
        where = f"output {output.name!r}"
        for key, why in UNSUPPORTED_OUTPUT_PARAMETERS.items():
            if key in output.parameters:
                raise InvalidArgument(f"{where}: parameter {key!r}: {why}")
        if output.ref is not None:
            shm.check(output.ref, where)
            refs[output.name] = output.ref
    return refs


def encode_outputs(
    results: Mapping[str, Any], refs: Mapping[str, TensorRef], shm: MemoryLease
) -> list[OutputTensor]:
    """The response's outputs in the results' order, KServe v2 datatypes from the arrays'
    dtypes; an output with a place in ``refs`` is written there (its ``data`` None), from
    host or device memory (:mod:`.memory`); one left in device memory that travels in
    the response is copied to the host. Every place is checked before the first is
    written, so a failure writes nothing.

    Raises:
        InvalidArgument: an output needs more bytes than its place holds.
    """
    shared: list[tuple[TensorRef, Output]] = []
    for name, array in results.items():
        ref = refs.get(name)
        if ref is not None:
            data: Output = array if isinstance(array, DeviceArray) else raw_view(array)
            shm.check(
                ref, f"output {name!r}", data.nbytes if isinstance(data, DeviceArray) else len(data)
            )
            shared.append((ref, data))
    for ref, data in shared:
        shm.write(ref, data, "output")  # checked above: cannot fail half-way
    return [
        OutputTensor(
            name,
            from_numpy(array.dtype),
            tuple(array.shape),
            None if name in refs else _host(array),
        )
        for name, array in results.items()
    ]


def _host(array: np.ndarray | DeviceArray) -> np.ndarray:
    return array.to_host() if isinstance(array, DeviceArray) else array
