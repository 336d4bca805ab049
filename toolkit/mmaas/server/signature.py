"""Check a request's tensors against the served signature (``manifest.model``).

Names, datatypes and shapes are checked from the request's metadata before any data is
decoded. Datatypes are the engine's I/O datatypes as the manifest records them, whatever
the engine's precision (an fp16 engine with FP32 I/O takes FP32: C17). Shapes must have
the declared rank, equal every static dim, and lie inside the optimization profile
(min..max per axis). Every violation raises
:class:`~mmaas.server.status.InvalidArgument` saying what was expected and what was got.
A scalar may be sent in the shape it is advertised with (Triton's convention:
:func:`~mmaas.server.protocol.messages.advertised_shape`, ``[1]`` for a rank-0 input,
``[B, 1]`` for a batch-only one) or as declared; :func:`as_declared` gives it the declared
shape, and :func:`as_advertised` gives such an output its advertised one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.core.profile import outside
from mmaas.server.protocol.types import InferRequest
from mmaas.server.status import InvalidArgument


def as_declared(model: ModelInfo, request: InferRequest) -> InferRequest:
    """``request`` with every input sent in its advertised scalar shape (``[1]``;
    ``[B, 1]`` batched) given its declared shape (``[]``; ``[B]``); others unchanged."""
    rank = int(model.max_batch_size > 0)  # a scalar's declared rank: the batch axis or none
    scalars = {t.name for t in model.inputs if len(t.shape) == rank}
    if not any(t.name in scalars and t.shape[rank:] == (1,) for t in request.inputs):
        return request
    inputs = [
        replace(t, shape=t.shape[:rank]) if t.name in scalars and t.shape[rank:] == (1,) else t
        for t in request.inputs
    ]
    return replace(request, inputs=inputs)


def as_advertised(model: ModelInfo, results: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``results`` with every scalar output (declared with no dims besides the batch
    axis) in its advertised shape: one dim of 1 added (Triton's ``reshape``)."""
    rank = int(model.max_batch_size > 0)
    scalars = {t.name for t in model.outputs if len(t.shape) == rank}
    return {
        name: array.reshape((*array.shape, 1)) if name in scalars and array.ndim == rank else array
        for name, array in results.items()
    }


def describe(tensor: TensorInfo) -> str:
    """``'x' (FP32 [-1, 3, -1, -1])``: how messages name a tensor of the signature."""
    return f"{tensor.name!r} ({tensor.datatype} {list(tensor.shape)})"


def check_inputs(model: ModelInfo, tensors: Sequence[tuple[str, str, Sequence[int]]]) -> None:
    """Check ``(name, datatype, shape)`` of every request input.

    Raises:
        InvalidArgument: an unknown or missing (not optional) input, another datatype than
            the model's, or a shape of another rank, a wrong static dim, or outside the
            profile.
    """
    declared = {tensor.name: tensor for tensor in model.inputs}
    takes = ", ".join(describe(tensor) for tensor in model.inputs)
    for name, datatype, shape in tensors:
        if name not in declared:
            raise InvalidArgument(
                f"unknown input {name!r} in inputs; model {model.name!r} takes {takes}"
            )
        _check_tensor(declared[name], datatype, tuple(shape))
    given = {t[0] for t in tensors}
    missing = [name for name, t in declared.items() if name not in given and not t.optional]
    if missing:
        raise InvalidArgument(
            f"missing input {', '.join(map(repr, missing))} in inputs; "
            f"model {model.name!r} takes {takes}"
        )


def resolve_outputs(model: ModelInfo, requested: Sequence[str]) -> list[str]:
    """The output names to compute: all of the model's when ``requested`` is empty, else
    exactly ``requested`` in the request's order (KServe v2 ``outputs`` field).

    Raises:
        InvalidArgument: a requested name is not an output of the model, or repeats.
    """
    if not requested:
        return [tensor.name for tensor in model.outputs]
    known = {tensor.name for tensor in model.outputs}
    for index, name in enumerate(requested):
        if name not in known:
            raise InvalidArgument(
                f"unknown output {name!r} in outputs; model {model.name!r} has "
                f"{', '.join(describe(tensor) for tensor in model.outputs)}"
            )
        if name in requested[:index]:
            raise InvalidArgument(f"output {name!r} is requested twice in outputs")
    return list(requested)


def _check_tensor(tensor: TensorInfo, datatype: str, shape: tuple[int, ...]) -> None:
    where = f"input {tensor.name!r}"
    if datatype != tensor.datatype:  # a KServe v2 name: the front ends refuse others
        raise InvalidArgument(
            f"{where}: datatype {datatype}, expected {tensor.datatype} (the engine's I/O datatype)"
        )
    if len(shape) != len(tensor.shape):
        raise InvalidArgument(
            f"{where}: shape {list(shape)} has rank {len(shape)}, expected "
            f"rank {len(tensor.shape)} like {list(tensor.shape)}"
        )
    low = tensor.min or tuple(max(dim, 0) for dim in tensor.shape)
    high: tuple[int | None, ...] = tensor.max or tuple(
        dim if dim > 0 else None for dim in tensor.shape
    )
    axis = outside(shape, low, high)
    if axis is not None:
        raise InvalidArgument(
            f"{where}: shape {list(shape)} is outside the optimization profile: axis "
            f"{axis} is {shape[axis]}, allowed {_allowed(low[axis], high[axis])} "
            f"(min {list(low)}, max {list(tensor.max or tensor.shape)})"
        )


def _allowed(low: int, high: int | None) -> str:
    if high is None:
        return f">= {low}"
    return str(low) if low == high else f"{low}..{high}"
