"""What a back end's build target refuses before any Docker work, and its compile command.

:func:`engine_command` runs the checks ``mmaas build`` would otherwise meet only after the
builder image is built (TensorRT: the template values -- builder image of another release,
GPU targets -- and the trtexec argv of the pinned release, which refuses flags that
release lacks and profiles trtexec cannot express) and returns the compile's command.
``mmaas validate`` reports its problems with every other spec problem's file, line and key
path; ``mmaas render`` prints the command.
"""

from __future__ import annotations

import re

from mmaas.backends import get_target
from mmaas.core.errors import SpecError, SpecProblem
from mmaas.spec.load import LoadedSpec
from mmaas.spec.yamlio import format_key_path

LAST_KEY = re.compile(r"(\.[^.\[]+|\[[^\]]*\])$")


def engine_command(loaded: LoadedSpec) -> list[str] | None:
    """The compile's command for ``loaded`` as the builder stage runs it (None for a back
    end that compiles through a library call), after every check of its build target.

    Raises:
        SpecError: every problem the build target finds, each located in model.yaml.
    """
    target = get_target(loaded.spec.backend)
    problems: list[SpecProblem] = []
    command = None
    try:
        target.template_values(loaded.spec)
    except SpecError as exc:
        problems += exc.problems
    try:
        command = target.engine_command(loaded.spec, loaded.source_path, str(loaded.path))
    except SpecError as exc:
        problems += exc.problems
    if problems:
        unique = {(p.key_path, p.message): located(p, loaded) for p in problems}
        raise SpecError(sorted(unique.values(), key=lambda p: (p.line or 0, p.column or 0)))
    return command


def located(problem: SpecProblem, loaded: LoadedSpec) -> SpecProblem:
    """``problem`` in ``loaded``'s model.yaml, at the line and column of its key path or,
    for a key the file does not write (a default), of the nearest key above it."""
    positions = {format_key_path(path): where for path, where in loaded.positions.items()}
    key = problem.key_path
    while key and key not in positions:
        key = LAST_KEY.sub("", key)
    line, column = positions.get(key, (None, None))
    return SpecProblem(str(loaded.path), problem.key_path, problem.message, line, column)
