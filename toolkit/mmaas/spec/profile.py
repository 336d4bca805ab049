"""Optimization profiles: check an input's min/opt/max against its shape, or suggest one.

A profile is three full shapes (batch axis included), as trtexec's ``--minShapes``,
``--optShapes`` and ``--maxShapes`` take them. Rules (the one rule set,
:mod:`mmaas.core.profile`): all three or none; one size per axis; ``min <= opt <= max`` per
axis; fixed axes (``shape`` value > 0) equal in all three; with ``max_batch_size > 0`` axis
0 runs from 1 to ``max_batch_size`` (Triton's batching).
Profiles match an input by its name and axis index, never by the ONNX dim symbols.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from mmaas.core.profile import POINTS, wrong_ranks
from mmaas.spec.yamlio import KeyPath

SPATIAL_PROFILE = (32, 640, 1280)  # H, W of NCHW images
GENERIC_PROFILE = (1, 128, 512)  # any other dynamic axis (sequence length...)
PROFILE_KEYS = POINTS

Shape = tuple[int, ...]
Profile = tuple[Shape, Shape, Shape]
Report = Callable[[KeyPath, str], None]


def suggest_profile(
    shape: Sequence[int], max_batch_size: int, minimums: Mapping[int, int] | None = None
) -> Profile:
    """A starting (min, opt, max) for ``shape`` (``-1`` = dynamic): fixed axes keep their
    size; a dynamic axis 0 is the batch (1, 1, max_batch_size) when max_batch_size > 0, and
    (1, 1, 1) for a rank >= 2 tensor otherwise; the last two axes of a rank-4 tensor are
    image sides :data:`SPATIAL_PROFILE`; any other dynamic axis gets
    :data:`GENERIC_PROFILE`. ``minimums`` (axis -> smallest size the graph runs at,
    :mod:`mmaas.spec.graph_limits`) raise a dynamic axis's guess so that min, opt and max
    are at least that. Guesses: the user tunes them."""
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
    for axis, least in (minimums or {}).items():
        if axis < len(shape) and shape[axis] <= 0 and not (axis == 0 and max_batch_size > 0):
            small, middle, large = triples[axis]
            triples[axis] = (max(small, least), max(middle, least), max(large, least))
    low, opt, high = zip(*triples, strict=True) if triples else ((), (), ())
    return tuple(low), tuple(opt), tuple(high)


def check_profile(
    what: str,
    shape: Shape,
    given: tuple[Shape | None, Shape | None, Shape | None] | None,
    path: KeyPath,
    max_batch_size: int,
    report: Report,
    unknown: frozenset[str] = frozenset(),
) -> Profile | None:
    """Check the ``given`` (min, opt, max) of input ``what`` (e.g. ``input 'x'``) at key
    ``path`` against ``shape``; ``report(key_path, message)`` receives every problem: each
    point of the wrong rank, and on every axis of the points of the right rank each of an
    order fault, a contradicted fixed size and a batch range fault (none hides another).
    ``unknown``: points whose value was invalid (already reported): not missing, not checked.

    Returns the profile: ``given``, or ``(shape, shape, shape)`` for a static input with
    none; None when it is missing (a dynamic input without a profile) or incomplete.
    """
    points = zip(PROFILE_KEYS, given or (None, None, None), strict=True)
    present: dict[str, Shape] = {key: tuple(value) for key, value in points if value is not None}
    if not present:
        return _without_profile(what, shape, path, max_batch_size, report, unknown)
    missing = [key for key in PROFILE_KEYS if key not in present and key not in unknown]
    if missing:
        report(path, f"{what}: give min, opt and max together (missing: {', '.join(missing)})")
    ranked = _right_rank(what, shape, present, path, report)
    for axis, dim in enumerate(shape):
        sizes = {key: dims[axis] for key, dims in ranked.items()}
        for key, message in _axis_problems(axis, dim, shape, sizes, max_batch_size):
            report((*path, key, axis), f"{what}: {message}")
    if len(present) < len(PROFILE_KEYS):
        return None
    return present["min"], present["opt"], present["max"]


def _without_profile(
    what: str, shape: Shape, path: KeyPath, max_batch_size: int, report: Report, unknown: frozenset
) -> Profile | None:
    dynamic = [axis for axis, dim in enumerate(shape) if dim == -1]
    if not dynamic:
        return shape, shape, shape
    if not unknown:
        low, opt, high = suggest_profile(shape, max_batch_size)
        report(
            path,
            f"{what} has dynamic axes {dynamic} and no optimization profile; add min/opt/max "
            f"for it under inputs, e.g. min: {list(low)}, opt: {list(opt)}, max: {list(high)}",
        )
    return None


def _right_rank(
    what: str, shape: Shape, present: dict[str, Shape], path: KeyPath, report: Report
) -> dict[str, Shape]:
    """The given points of ``shape``'s rank; a problem for each of another rank."""
    wrong = wrong_ranks(shape, [present.get(key, shape) for key in PROFILE_KEYS])
    for key in wrong:
        dims = present[key]
        report(
            (*path, key),
            f"{what}: {key} {list(dims)} has {len(dims)} axes, the input has "
            f"{len(shape)} {list(shape)}; give one size per axis",
        )
    return {key: dims for key, dims in present.items() if key not in wrong}


def _axis_problems(
    axis: int, dim: int, shape: Shape, sizes: dict[str, int], max_batch_size: int
) -> list[tuple[str, str]]:
    """``(key, message)`` for each fault of one axis (``sizes``: the points given there)."""
    got = ", ".join(f"{key} {sizes[key]}" for key in PROFILE_KEYS if key in sizes)
    problems = []
    values = [sizes[key] for key in PROFILE_KEYS if key in sizes]
    if values != sorted(values):
        key = "opt" if "opt" in sizes and sizes.get("min", 0) > sizes["opt"] else "max"
        problems.append((key, f"axis {axis}: {got}; need min <= opt <= max"))
    wrong = [key for key in PROFILE_KEYS if key in sizes and dim > 0 and sizes[key] != dim]
    if wrong:
        problems.append(
            (
                wrong[0],
                f"axis {axis} is fixed at {dim} (shape {list(shape)}), so "
                f"min, opt and max must all be {dim} there (got {got})",
            )
        )
    if axis == 0 and max_batch_size > 0:
        low, high = sizes.get("min", 1), sizes.get("max", max_batch_size)
        if (low, high) != (1, max_batch_size):
            problems.append(
                (
                    "min" if low != 1 else "max",
                    f"axis 0 is the batch axis (max_batch_size {max_batch_size}): its profile "
                    f"must run from min 1 to max {max_batch_size} (got {got})",
                )
            )
    return problems
