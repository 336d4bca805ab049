"""One exception tree for every expected failure, each class with its exit code.

The CLI (``mmaas.cli``) maps these to one clear line on stderr and the class's
``exit_code``; anything that is not an :class:`MmaasError` is a bug (exit 3).
Exit codes follow the house convention: 2 for spec/usage errors, 1 for expected
failures of the outside world, 3 for bugs, 130 for Ctrl-C.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class MmaasError(Exception):
    """Base of every expected mmaas failure.

    Args:
        message: one line that says what is wrong and what to do about it.
        hint: optional second line with the fix, printed after the message.
    """

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


@dataclass(frozen=True)
class SpecProblem:
    """One problem in a model.yaml, located for the user.

    Attributes:
        file: path of the model.yaml as the user named it.
        key_path: dotted key path, e.g. ``inputs[0].max[2]``; ``""`` for the whole file.
        message: what is wrong and what to do.
        line: 1-based line in ``file`` or None when YAML gives no position.
        column: 1-based column or None.
    """

    file: str
    key_path: str
    message: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return (
            f"{where}: {self.key_path}: {self.message}"
            if self.key_path
            else f"{where}: {self.message}"
        )


class SpecError(MmaasError):
    """A model.yaml (or the ONNX model it names) is invalid; carries every problem found.

    Exit code 2. ``problems`` lists all problems at once, each with file, line, key path.
    """

    exit_code = 2

    def __init__(self, problems: Sequence[SpecProblem]) -> None:
        self.problems = list(problems)
        count = len(self.problems)
        head = f"{count} problem{'s' if count != 1 else ''} in the model spec"
        super().__init__(head + ":\n" + "\n".join(f"  {p}" for p in self.problems))


class UsageError(MmaasError):
    """The command line names something that does not exist or cannot be used (exit 2)."""

    exit_code = 2


class SourceError(MmaasError):
    """The model source (ONNX file or URL) is missing, unreadable or fails its hash pin."""


class ProcessError(MmaasError):
    """A subprocess failed. Carries the argv, exit code and the tail of its output.

    Attributes:
        argv: the exact argument vector that was run.
        returncode: its exit status.
        output_tail: the last lines of its combined output (at most ~40 lines).
    """

    def __init__(
        self,
        message: str,
        *,
        argv: Sequence[str],
        returncode: int,
        output_tail: str = "",
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.argv = list(argv)
        self.returncode = returncode
        self.output_tail = output_tail

    def __str__(self) -> str:
        text = super().__str__()
        if self.output_tail:
            text += "\n  last output:\n" + "\n".join(
                "    " + line for line in self.output_tail.splitlines()
            )
        return text


class DockerError(MmaasError):
    """The Docker engine is unreachable, or a docker build/run/push failed."""


class BuildError(MmaasError):
    """The engine could not be compiled, or failed its profile, accuracy or latency check."""


class InputError(MmaasError):
    """A request's tensor cannot be fed to the engine although its datatype and shape are
    right (e.g. a BYTES element that is not the UTF-8 an ONNX Runtime STRING tensor holds);
    the server answers INVALID_ARGUMENT with the message."""


class IntegrityError(MmaasError):
    """An engine or manifest does not match its recorded hashes: never serve it."""


class CompatibilityError(MmaasError):
    """An engine was built for another device, driver or back-end version than this host."""


class RegistryError(MmaasError):
    """A container registry refused, failed or could not be reached."""
