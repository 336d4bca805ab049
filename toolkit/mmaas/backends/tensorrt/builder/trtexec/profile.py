"""The optimization profile an engine was built with, as trtexec's log says, and its
comparison with model.yaml's.

Lines read (``samples/common/sampleEngines.cpp`` and ``sampleOptions.cpp``, 8.x-11.x):

* ``Set shape of input tensor NAME for optimization profile N to: MIN=AxB OPT=AxB
  MAX=AxB`` (``Set input shape tensor ...`` for shape tensors): what the builder was given,
  printed from 10.x on, implicit overrides included;
* ``Input build shape: NAME=MIN+OPT+MAX`` (8.x) and ``Input build shape (profile N):
  NAME=MIN+OPT+MAX`` (10.x): the options echo, what the command line asked;
* ``[W] Dynamic dimensions required for input: NAME, but no shapes were provided.
  Automatically overriding shape to: AxB``: trtexec pinned every dynamic dim of NAME to 1
  (the engine then accepts that one shape only). A build that shows it has failed.

Names may hold ``:`` (``x:0``); dims are ``x``-joined, empty for a scalar.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mmaas.core.manifest import ModelInfo

SET_SHAPE = re.compile(
    r"^Set (?:shape of input tensor|input shape tensor) (.+) for optimization profile "
    r"(\d+) to: MIN=(\S*) OPT=(\S*) MAX=(\S*)$"
)
BUILD_SHAPE = re.compile(r"^Input build shape(?: \(profile (\d+)\))?\s*: (.+)=(\S*)\+(\S*)\+(\S*)$")
OVERRIDE = re.compile(
    r"^Dynamic dimensions required for input: (.+), but no shapes were provided\. "
    r"Automatically overriding shape to: (\S*)"
)
Dims = tuple[int, ...]


@dataclass(frozen=True)
class ProfileShapes:
    """One input's shapes in one optimization profile.

    Attributes:
        input: the tensor name. profile: the profile index (0 first).
        min, opt, max: full dims. source: ``"builder"`` (the ``Set shape`` line: what the
            builder got) or ``"options"`` (the options echo: what the command asked).
    """

    input: str
    profile: int
    min: Dims
    opt: Dims
    max: Dims
    source: str


@dataclass(frozen=True)
class ShapeOverride:
    """trtexec's implicit override of a dynamic input given no shapes: ``input`` was pinned
    to ``shape`` (every dynamic dim 1)."""

    input: str
    shape: Dims


def profile_fact(text: str, shapes: list[ProfileShapes], overrides: list[ShapeOverride]) -> bool:
    """Collect ``text`` (one log message, ``[TRT] `` prefix removed) when it is one of the
    lines above; True when it was."""
    if found := SET_SHAPE.match(text):
        name, index, low, opt, high = found.groups()
        shapes.append(
            ProfileShapes(name, int(index), _dims(low), _dims(opt), _dims(high), "builder")
        )
    elif found := BUILD_SHAPE.match(text):
        index, name, low, opt, high = found.groups()
        shapes.append(
            ProfileShapes(name, int(index or 0), _dims(low), _dims(opt), _dims(high), "options")
        )
    elif found := OVERRIDE.match(text):
        overrides.append(ShapeOverride(found.group(1), _dims(found.group(2))))
    else:
        return False
    return True


def engine_profile(shapes: Sequence[ProfileShapes], profile: int = 0) -> dict[str, ProfileShapes]:
    """``{input: shapes}`` of ``profile`` as the builder got it: the ``Set shape`` lines
    where the log has them (10.x), else the options echo (8.x)."""
    chosen = [s for s in shapes if s.profile == profile and s.source == "builder"] or [
        s for s in shapes if s.profile == profile and s.source == "options"
    ]
    return {s.input: s for s in chosen}


def profile_mismatches(
    shapes: Sequence[ProfileShapes],
    overrides: Sequence[ShapeOverride],
    model: ModelInfo,
    network: Mapping[str, Dims],
) -> list[str]:
    """Why the engine's profile 0 is not model.yaml's, one line per input (empty: equal).

    Every input dynamic in the network (``network``: :func:`~mmaas.backends.tensorrt.
    trtexec.network.network_inputs`) must appear with min, opt and max equal to
    ``model``'s; an implicit override is always a mismatch, naming the input.
    """
    found = engine_profile(shapes)
    problems = [
        f"input {o.input!r}: trtexec got no shapes for it and pinned it to "
        f'{_text(o.shape)} ("Dynamic dimensions required for input: {o.input}, ... '
        'Automatically overriding shape to"): the engine would take that one shape only'
        for o in overrides
    ]
    overridden = {o.input for o in overrides}
    for tensor in model.inputs:
        if -1 not in network.get(tensor.name, tensor.shape) or tensor.name in overridden:
            continue
        wanted = (tensor.min, tensor.opt, tensor.max)
        got = found.get(tensor.name)
        if got is None:
            problems.append(
                f"input {tensor.name!r}: trtexec's log shows no optimization profile for it; "
                f"model.yaml asks min {_text(tensor.min)}, opt {_text(tensor.opt)}, "
                f"max {_text(tensor.max)}"
            )
        elif (got.min, got.opt, got.max) != wanted:
            problems.append(
                f"input {tensor.name!r}: the engine's profile is min {_text(got.min)}, opt "
                f"{_text(got.opt)}, max {_text(got.max)}; model.yaml asks min "
                f"{_text(tensor.min)}, opt {_text(tensor.opt)}, max {_text(tensor.max)}"
            )
    return problems


def _dims(text: str) -> Dims:
    return tuple(int(d) for d in text.split("x")) if text else ()


def _text(dims: Sequence[int] | None) -> str:
    if dims is None:
        return "(none)"
    return "x".join(map(str, dims)) or "scalar"
