"""Every subprocess mmaas runs: argv lists only (never ``shell=True``).

Failures raise :class:`~mmaas.core.errors.ProcessError` carrying the argv, the exit code
and the tail of the output, so the CLI can show the user what went wrong.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import IO, TypeVar

from mmaas.core.errors import ProcessError

TAIL_LINES = 40
T = TypeVar("T")
# Where :func:`stream` echoes output lines (None: stderr); set with :func:`output_to`.
_OUTPUT: ContextVar[Callable[[str], None] | None] = ContextVar("mmaas_output", default=None)


@contextmanager
def output_to(sink: Callable[[str], None]) -> Iterator[None]:
    """Within the block, :func:`stream` hands each echoed line (without its newline) to
    ``sink`` instead of writing it to stderr: ``mmaas build``'s progress display and its
    log file take BuildKit's and the compile's raw output this way."""
    token = _OUTPUT.set(sink)
    try:
        yield
    finally:
        _OUTPUT.reset(token)


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    input_bytes: bytes | None = None,
    check: bool = True,
    what: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` to completion and capture stdout and stderr as text.

    Args:
        argv: the argument vector; ``argv[0]`` is looked up on PATH.
        env: extra environment variables laid over ``os.environ``.
        cwd: working directory.
        input_bytes: bytes fed to stdin.
        check: raise on a non-zero exit.
        what: a short description for the error message (defaults to ``argv[0]``).

    Raises:
        ProcessError: the program is missing, or exits non-zero while ``check`` is set.
    """
    try:
        done = subprocess.run(
            list(argv),
            env=_merged(env),
            cwd=cwd,
            input=input_bytes,
            capture_output=True,
            check=False,
        )
    except FileNotFoundError as exc:
        raise ProcessError(
            f"{what or argv[0]}: program not found ({argv[0]})", argv=argv, returncode=127
        ) from exc
    result = subprocess.CompletedProcess(
        done.args,
        done.returncode,
        done.stdout.decode(errors="replace"),
        done.stderr.decode(errors="replace"),
    )
    if check and result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-TAIL_LINES:])
        raise ProcessError(
            f"{what or argv[0]} failed with exit code {result.returncode}",
            argv=argv,
            returncode=result.returncode,
            output_tail=tail,
        )
    return result


def stream(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    input_bytes: bytes | None = None,
    echo: bool = True,
    what: str | None = None,
) -> str:
    """Run ``argv``, echoing its combined output line by line to stderr while it runs (or
    to the sink of :func:`output_to`; ``echo=False``: not at all).

    Returns the full output. Used for long jobs (docker build) whose progress the user
    watches.

    Raises:
        ProcessError: the program is missing or exits non-zero; carries the output tail.
    """
    lines: list[str] = []
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    try:
        proc = subprocess.Popen(
            list(argv),
            env=_merged(env),
            cwd=cwd,
            stdin=subprocess.PIPE if input_bytes is not None else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
    except FileNotFoundError as exc:
        raise ProcessError(
            f"{what or argv[0]}: program not found ({argv[0]})", argv=argv, returncode=127
        ) from exc
    if input_bytes is not None and proc.stdin is not None:
        proc.stdin.write(input_bytes)
        proc.stdin.close()
    assert proc.stdout is not None
    sink = _OUTPUT.get()
    for raw in proc.stdout:
        line = raw.decode(errors="replace")
        lines.append(line)
        tail.append(line.rstrip("\n"))
        if echo and sink is not None:
            sink(line.rstrip("\n"))
        elif echo:
            sys.stderr.write(line)
            sys.stderr.flush()
    code = proc.wait()
    if code != 0:
        raise ProcessError(
            f"{what or argv[0]} failed with exit code {code}",
            argv=argv,
            returncode=code,
            output_tail="\n".join(tail),
        )
    return "".join(lines)


def read_output(argv: Sequence[str], consume: Callable[[IO[bytes]], T]) -> tuple[T, int, str]:
    """Run ``argv`` and hand its standard output, a binary stream read as it is written
    (a tar archive of ``docker cp SRC -``), to ``consume``; return what ``consume``
    returned, the exit code and the standard error text. The program's output after
    ``consume`` returns is drained.

    Raises:
        ProcessError: the program is missing.
    """
    with tempfile.TemporaryFile() as errors:
        try:
            child = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=errors)
        except FileNotFoundError as exc:
            raise ProcessError(f"{argv[0]}: program not found", argv=argv, returncode=127) from exc
        assert child.stdout is not None
        with child.stdout:
            result = consume(child.stdout)
            while child.stdout.read(1 << 20):
                pass
        code = child.wait()
        errors.seek(0)
        return result, code, errors.read().decode(errors="replace")


def _merged(env: Mapping[str, str] | None) -> dict[str, str] | None:
    return None if env is None else {**os.environ, **env}
