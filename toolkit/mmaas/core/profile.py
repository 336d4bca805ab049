"""The one rule set of optimization profiles, shared by spec loading (:mod:`mmaas.spec.
profile`), the trtexec argument vector (:mod:`mmaas.backends.tensorrt.builder.trtexec.shapes`) and
the server's request checks (:mod:`mmaas.server.signature`).

A profile is three full shapes (batch axis included), as trtexec's ``--minShapes``,
``--optShapes`` and ``--maxShapes`` take them: one size per axis, ``min <= opt <= max``
per axis, fixed axes (a declared size > 0) equal in all three, and with ``max_batch_size >
0`` axis 0 running from 1 to ``max_batch_size`` (Triton's batching). A request shape lies
inside the profile when it has the declared rank and ``min <= dim <= max`` on every axis.
Input names holding ``'`` or ``,`` cannot be written in trtexec's shape syntax (C1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

ProfilePoint = Literal["min", "opt", "max"]
POINTS: tuple[ProfilePoint, ...] = ("min", "opt", "max")
UNQUOTABLE = ("'", ",")
Shape = tuple[int, ...]


def quotable(name: str) -> bool:
    """True when trtexec's shape syntax can name the input (no ``'`` or ``,``)."""
    return not any(char in name for char in UNQUOTABLE)


def wrong_ranks(shape: Sequence[int], profile: Sequence[Sequence[int]]) -> list[ProfilePoint]:
    """The points of ``profile`` (min, opt, max) whose rank differs from ``shape``'s."""
    return [point for point, dims in zip(POINTS, profile, strict=True) if len(dims) != len(shape)]


def axis_fault(
    axis: int, declared: int, sizes: tuple[int, int, int], max_batch_size: int
) -> Literal["order", "fixed", "batch"] | None:
    """What is wrong with one axis of a profile (``sizes``: min, opt, max), if anything:
    ``order`` (not min <= opt <= max), ``fixed`` (a declared size > 0 the three differ
    from), ``batch`` (axis 0 of a batching model not running from 1 to max_batch_size);
    checked in that order."""
    low, opt, high = sizes
    if not low <= opt <= high:
        return "order"
    if fixed_mismatch(declared, sizes):
        return "fixed"
    if axis == 0 and max_batch_size > 0 and (low != 1 or high != max_batch_size):
        return "batch"
    return None


def fixed_mismatch(declared: int, sizes: tuple[int, int, int]) -> bool:
    """True when a fixed axis (declared size > 0) is not min = opt = max = that size."""
    return declared > 0 and sizes != (declared, declared, declared)


def outside(shape: Sequence[int], low: Sequence[int], high: Sequence[int | None]) -> int | None:
    """The first axis of a request ``shape`` outside ``low..high`` (``None`` in ``high``:
    unbounded), or None when it lies inside (ranks must already agree)."""
    for axis, dim in enumerate(shape):
        top = high[axis]
        if dim < low[axis] or (top is not None and dim > top):
            return axis
    return None
