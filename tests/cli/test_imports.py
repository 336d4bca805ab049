"""The command line stays light: ``mmaas --help`` imports no verb and nothing but Click and
the standard library beyond ``mmaas.cli`` and ``mmaas.core.errors``; ``mmaas VERB --help``
imports that verb's module alone, and no library of it; the root help, written from the
table of verbs, is what Click writes from the imported commands."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

from mmaas.cli import VERBS, cli

HEAVY = ("numpy", "onnx", "onnxruntime", "docker", "pydantic", "jinja2", "grpc", "rich", "yaml",
         "torch", "ml_dtypes", "blake3", "google", "cryptography", "transformers")  # fmt: skip
ROOT_MODULES = {"mmaas", "mmaas.__main__", "mmaas.cli", "mmaas.core", "mmaas.core.errors"}


LIST_MODULES = "import json, sys; print(json.dumps(sorted(sys.modules)), file=sys.stderr)"


def imported(code: str) -> set[str]:
    """The modules in ``sys.modules`` after running the Python ``code`` in a fresh
    interpreter, then :data:`LIST_MODULES`; the code must exit 0."""
    script = f"try:\n    {code}\nfinally:\n    {LIST_MODULES}\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return set(json.loads(done.stderr.splitlines()[-1]))


def mmaas(*args: str) -> set[str]:
    """The modules the real ``mmaas ARGS`` imports (what its console script runs, in a
    fresh interpreter), beyond those the interpreter imports for no code (``site``, path
    hooks)."""
    return imported(f"from mmaas.cli import main; main({list(args)!r})") - imported("pass")


def outside_the_stdlib(modules: set[str]) -> set[str]:
    """The top-level packages of ``modules`` that the standard library does not hold."""
    return {name.split(".")[0] for name in modules} - set(sys.stdlib_module_names)


def test_help_imports_only_click_the_stdlib_and_the_root_of_the_cli() -> None:
    loaded = mmaas("--help")
    assert not {name.split(".")[0] for name in loaded} & set(HEAVY)
    assert outside_the_stdlib(loaded) == {"click", "mmaas"}
    assert {name for name in loaded if name.startswith("mmaas")} <= ROOT_MODULES


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_a_verbs_help_imports_its_module_alone_and_none_of_its_libraries(verb: str) -> None:
    loaded = mmaas(verb, "--help")
    assert not {name.split(".")[0] for name in loaded} & set(HEAVY)
    assert outside_the_stdlib(loaded) == {"click", "mmaas"}
    verbs = {name for name in loaded if name.startswith("mmaas.cli.")}
    assert verbs <= {f"mmaas.cli.{verb}", "mmaas.cli.options"}, "import other verbs lazily"


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_the_table_holds_each_verbs_own_short_help(verb: str) -> None:
    command = cli.get_command(click.Context(cli), verb)
    assert command is not None
    assert VERBS[verb] == command.get_short_help_str(limit=sys.maxsize)


@pytest.mark.parametrize("width", [40, 60, 80, 100, 200])
def test_the_root_help_lists_the_verbs_as_click_does_from_the_commands(width: int) -> None:
    written = []
    for format_commands in (cli.format_commands, click.Group.format_commands.__get__(cli)):
        formatter = click.HelpFormatter(width=width)
        format_commands(click.Context(cli), formatter)
        written.append(formatter.getvalue())
    ours, clicks = written
    assert ours == clicks and "  build " in ours


def test_ci_local_defaults_to_the_workflow_ci_runs() -> None:
    from mmaas.ci.local import DEFAULT_WORKFLOW
    from mmaas.cli.ci import DEFAULT_WORKFLOW as WRITTEN_OUT

    assert WRITTEN_OUT == DEFAULT_WORKFLOW == Path(".github/workflows/models.yml")
