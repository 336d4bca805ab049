"""What a back end's build target refuses before any Docker work, and its compile command.

:func:`engine_commands` runs the checks ``mmaas build`` would otherwise meet only after the
builder image is built (TensorRT: the template values -- builder image of another release,
GPU targets -- and the trtexec argv of the pinned release, which refuses flags that
release lacks and profiles trtexec cannot express) and returns the compile's command.
``mmaas validate`` reports its problems with every other spec problem's file, line and key
path; ``mmaas render`` prints the command.
"""

from __future__ import annotations

import re
from dataclasses import replace

from mmaas.backends import get_target
from mmaas.core.errors import SpecError, SpecProblem
from mmaas.spec.load import LoadedSpec
from mmaas.spec.yamlio import format_key_path

LAST_KEY = re.compile(r"(\.[^.\[]+|\[[^\]]*\])$")


def engine_commands(loaded: LoadedSpec) -> dict[str, list[str] | None]:
    """Each engine's compile command (by engine name) as the builder stage runs it (None
    for a back end that compiles through a library call), after every check of its build
    target; a multi-engine model's problems are located under ``engines.<engine>``.

    Raises:
        SpecError: every problem the build targets find, each located in model.yaml.
    """
    problems: list[SpecProblem] = []
    commands: dict[str, list[str] | None] = {}
    for engine in loaded.engines:
        target = get_target(engine.spec.backend)
        found: list[SpecProblem] = []
        commands[engine.name] = None
        try:
            target.template_values(engine.spec)
        except SpecError as exc:
            found += exc.problems
        try:
            commands[engine.name] = target.engine_command(
                engine.spec, engine.source_path, str(loaded.path)
            )
        except SpecError as exc:
            found += exc.problems
        if loaded.spec.engines is not None:
            found = [replace(p, key_path=f"engines.{engine.name}.{p.key_path}") for p in found]
        problems += found
    if problems:
        unique = {(p.key_path, p.message): located(p, loaded) for p in problems}
        raise SpecError(sorted(unique.values(), key=lambda p: (p.line or 0, p.column or 0)))
    return commands


def located(problem: SpecProblem, loaded: LoadedSpec) -> SpecProblem:
    """``problem`` in ``loaded``'s model.yaml, at the line and column of its key path or,
    for a key the file does not write (a default), of the nearest key above it."""
    positions = {format_key_path(path): where for path, where in loaded.positions.items()}
    key = problem.key_path
    while key and key not in positions:
        key = LAST_KEY.sub("", key)
    line, column = positions.get(key, (None, None))
    return SpecProblem(str(loaded.path), problem.key_path, problem.message, line, column)
