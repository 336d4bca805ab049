"""Optimization profiles: check an input's min/opt/max against its shape, or suggest one.

A profile is three full shapes (batch axis included), as trtexec's ``--minShapes``,
``--optShapes`` and ``--maxShapes`` take them. Rules (the one rule set,
:mod:`mmaas.core.profile`): all three or none; one size per axis; ``min <= opt <= max`` per
axis; fixed axes (``shape`` value > 0) equal in all three; with ``max_batch_size > 0`` axis
0 runs from 1 to ``max_batch_size`` (Triton's batching).
Profiles match an input by its name and axis index, never by the ONNX dim symbols.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mmaas.core.profile import POINTS, axis_fault, wrong_ranks
from mmaas.spec.yamlio import KeyPath

SPATIAL_PROFILE = (32, 640, 1280)  # H, W of NCHW images
GENERIC_PROFILE = (1, 128, 512)  # any other dynamic axis (sequence length...)
PROFILE_KEYS = POINTS

Shape = tuple[int, ...]
Profile = tuple[Shape, Shape, Shape]
Report = Callable[[KeyPath, str], None]


def suggest_profile(shape: Sequence[int], max_batch_size: int) -> Profile:
    """A starting (min, opt, max) for ``shape`` (``-1`` = dynamic): fixed axes keep their
    size; a dynamic axis 0 is the batch (1, 1, max_batch_size) when max_batch_size > 0, and
    (1, 1, 1) for a rank >= 2 tensor otherwise; the last two axes of a rank-4 tensor are
    image sides :data:`SPATIAL_PROFILE`; any other dynamic axis gets
    :data:`GENERIC_PROFILE`. Guesses: the user tunes them."""
    triples = []
    for axis, dim in enumerate(shape):
        if dim > 0:
            triples.append((dim, dim, dim))
        elif axis == 0 and (max_batch_size > 0 or len(shape) >= 2):
            triples.append((1, 1, max(max_batch_size, 1)))
        elif len(shape) == 4 and axis >= 2:
            triples.append(SPATIAL_PROFILE)
        else:
            triples.append(GENERIC_PROFILE)
    low, opt, high = zip(*triples, strict=True) if triples else ((), (), ())
    return tuple(low), tuple(opt), tuple(high)


def check_profile(
    what: str,
    shape: Shape,
    given: tuple[Shape | None, Shape | None, Shape | None] | None,
    path: KeyPath,
    max_batch_size: int,
    report: Report,
) -> Profile | None:
    """Check the ``given`` (min, opt, max) of input ``what`` (e.g. ``input 'x'``) at key
    ``path`` against ``shape``; ``report(key_path, message)`` receives every problem.

    Returns the profile: ``given``, or ``(shape, shape, shape)`` for a static input with
    none; None when it is missing (a dynamic input without a profile) or incomplete.
    """
    given = given or (None, None, None)
    if all(value is None for value in given):
        dynamic = [axis for axis, dim in enumerate(shape) if dim == -1]
        if not dynamic:
            return shape, shape, shape
        low, opt, high = suggest_profile(shape, max_batch_size)
        report(
            path,
            f"{what} has dynamic axes {dynamic} and no optimization profile; add min/opt/max "
            f"for it under inputs, e.g. min: {list(low)}, opt: {list(opt)}, max: {list(high)}",
        )
        return None
    missing = [key for key, value in zip(PROFILE_KEYS, given, strict=True) if value is None]
    if missing:
        report(path, f"{what}: give min, opt and max together (missing: {', '.join(missing)})")
        return None
    low, opt, high = (tuple(value or ()) for value in given)
    if _ranks_match(what, shape, (low, opt, high), path, report):
        for axis in range(len(shape)):
            sizes = (low[axis], opt[axis], high[axis])
            _check_axis(what, axis, shape, sizes, path, max_batch_size, report)
    return low, opt, high


def _ranks_match(what: str, shape: Shape, profile: Profile, path: KeyPath, report: Report) -> bool:
    wrong = wrong_ranks(shape, profile)
    for key, dims in zip(PROFILE_KEYS, profile, strict=True):
        if key in wrong:
            report(
                (*path, key),
                f"{what}: {key} {list(dims)} has {len(dims)} axes, the input has "
                f"{len(shape)} {list(shape)}; give one size per axis",
            )
    return not wrong


def _check_axis(
    what: str,
    axis: int,
    shape: Shape,
    sizes: tuple[int, int, int],
    path: KeyPath,
    max_batch_size: int,
    report: Report,
) -> None:
    low, opt, high = sizes
    dim = shape[axis]
    got = f"min {low}, opt {opt}, max {high}"
    fault = axis_fault(axis, dim, sizes, max_batch_size)
    if fault == "order":
        key = "opt" if low > opt else "max"
        report((*path, key, axis), f"{what}: axis {axis}: {got}; need min <= opt <= max")
    elif fault == "fixed":
        key = PROFILE_KEYS[next(i for i, size in enumerate(sizes) if size != dim)]
        report(
            (*path, key, axis),
            f"{what}: axis {axis} is fixed at {dim} (shape {list(shape)}), so min, opt and max "
            f"must all be {dim} there (got {got})",
        )
    elif fault == "batch":
        key = "min" if low != 1 else "max"
        report(
            (*path, key, 0),
            f"{what}: axis 0 is the batch axis (max_batch_size {max_batch_size}): its profile "
            f"must run from min 1 to max {max_batch_size} (got {got})",
        )
