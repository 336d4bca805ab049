"""Protocol-neutral inference requests and responses (KServe v2 ``$inference_request`` /
``ModelInferRequest`` and their responses, without the wire): what a front end translates
its messages into and out of, and what the request path (:mod:`mmaas.server.dataplane`)
takes and gives.

An input has exactly one data source: :class:`Values` (HTTP JSON ``data``, gRPC typed
``contents``), :class:`RawBytes` (gRPC ``raw_input_contents``, HTTP binary tensor data)
or a :class:`~mmaas.server.protocol.shm.TensorRef` (Triton's system shared memory
parameters). A front end lists the sources an input names and calls :func:`one_source`,
the one place that refuses none or several.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mmaas.server.protocol.shm import TensorRef
from mmaas.server.status import InvalidArgument

Param = bool | int | float | str | None  # a KServe v2 parameter value (InferParameter)
VALUES, RAW, SHARED = "values", "raw bytes", "shared memory"
SOURCES = {
    VALUES: "values (HTTP JSON 'data', gRPC typed 'contents')",
    RAW: "raw bytes (HTTP 'binary_data_size', gRPC 'raw_input_contents')",
    SHARED: "a system shared memory region ('shared_memory_region' in its parameters)",
}


@dataclass(frozen=True)
class Values:
    """Typed values: flat, or nested exactly as the shape (JSON). Numbers for numeric
    datatypes (BF16 too: rounded to the nearest bfloat16), booleans for BOOL, ``str``
    (sent UTF-8 encoded) or ``bytes`` for BYTES. ``values`` may be a list or a protobuf
    repeated field."""

    values: Sequence[Any]


@dataclass(frozen=True)
class RawBytes:
    """Raw tensor bytes: little-endian, row-major; BYTES as elements each prefixed by its
    4-byte little-endian length; BF16 as 2-byte bfloat16 words; BOOL one byte each."""

    data: bytes | memoryview


Source = Values | RawBytes | TensorRef


@dataclass(frozen=True)
class InferInput:
    """One input tensor: its name, KServe v2 datatype (``FP32``...), shape (every axis's
    concrete size), its one data source and its parameters."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    data: Source
    parameters: Mapping[str, Param] = field(default_factory=dict)


@dataclass(frozen=True)
class RequestedOutput:
    """One output the request names (KServe v2 ``outputs``): its parameters, the shared
    memory place it is written to (None: it travels in the response) and whether it
    travels as binary data (Triton's HTTP binary tensor data extension; gRPC outputs are
    always raw bytes)."""

    name: str
    parameters: Mapping[str, Param] = field(default_factory=dict)
    ref: TensorRef | None = None
    binary: bool = False


@dataclass(frozen=True)
class InferRequest:
    """One inference request: its ``id`` (echoed, logged), parameters, inputs, requested
    outputs (empty: every output of the model) and ``size``, its bytes on the wire (checked
    against the model's message limit). The model it names travels beside it (the gRPC
    message's ``model_name``, the HTTP URL)."""

    id: str
    inputs: Sequence[InferInput]
    outputs: Sequence[RequestedOutput] = ()
    parameters: Mapping[str, Param] = field(default_factory=dict)
    size: int = 0

    @property
    def headers(self) -> list[tuple[str, str, tuple[int, ...]]]:
        """``(name, datatype, shape)`` of every input, for the signature checks."""
        return [(tensor.name, tensor.datatype, tensor.shape) for tensor in self.inputs]


@dataclass(frozen=True)
class OutputTensor:
    """One output of a response: name, KServe v2 datatype, shape and its array (``data``;
    None when it was written to its shared memory place instead)."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    data: np.ndarray | None


@dataclass(frozen=True)
class InferResponse:
    """One response: the model's name and version, the request's ``id``, the outputs, and
    ``final``: the last response to its request (a decoupled model sends many; gRPC
    streams report it as ``triton_final_response``)."""

    model_name: str
    model_version: str
    id: str
    outputs: Sequence[OutputTensor]
    final: bool = True


def one_source(name: str, given: Sequence[str]) -> str:
    """The one data source of input ``name`` among ``given`` (:data:`VALUES`, :data:`RAW`,
    :data:`SHARED`: the ones the request names for it).

    Raises:
        InvalidArgument: none, or more than one.
    """
    if len(given) == 1:
        return given[0]
    named = [kind for kind in SOURCES if kind in given]  # one order over every wire
    sent = f"it sends {' and '.join(named)}" if named else "it sends none"
    values, raw, shared = SOURCES.values()
    raise InvalidArgument(
        f"input {name!r} needs exactly one data source: {values}, {raw} or {shared}; {sent}"
    )
