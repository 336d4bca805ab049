"""The ``mmaas`` command: root group, global options and the one error handler.

Exit codes: 0 success; 1 an expected failure (Docker, build, integrity...); 2 a spec or
usage error; 3 a bug (the traceback goes to a log file, or to stderr with ``--debug``);
130 interrupted. Logs and progress go to stderr, results to stdout.

Verbs are registered in one literal table (:data:`VERBS`: each verb's one-line help) and
imported when named (Click's "lazily loading subcommands" pattern), so a verb pays only for
its own imports: ``mmaas --help`` lists the verbs from the table and imports none of them,
``mmaas VERB --help`` imports that verb's module alone, and each verb module imports its
library inside its command, so ``mmaas ci changed`` needs neither ONNX, Jinja2 nor gRPC and
runs where only the ``ci`` extra is installed.
"""

from __future__ import annotations

import importlib
import json
import sys
import tempfile
import traceback
from dataclasses import asdict
from gettext import gettext
from pathlib import Path

import click

from mmaas import __version__
from mmaas.core.errors import MmaasError, SpecError

BUG_EXIT = 3
INTERRUPTED_EXIT = 130
# verb -> its one-line help in `mmaas --help` (the untruncated short help of its command,
# which is ``command`` of the module mmaas.cli.<verb>; tests keep the two equal)
VERBS = {
    "init": "Write PATH/model.yaml for an ONNX model.",
    "validate": "Validate MODEL (a model folder or its model.yaml) against its ONNX graph.",
    "render": "Print MODEL's Dockerfile(s) (stdout) and its build commands (stderr).",
    "build": "Build MODEL (a folder holding model.yaml, or the model.yaml itself) into an image.",
    "serve": "Serve MODEL (folder or model.yaml) on this host until Ctrl-C or SIGTERM.",
    "verify": "Verify TARGET: a model directory (manifest.json + engine) or a local image.",
    "push": "Push MODEL's image as REGISTRY/NAME:VERSION and REGISTRY/NAME:blake3-<engine hash>.",
    "export": "Export a built model to KServe, plain Kubernetes or a Triton model repository.",
    "bench": "Load-test TARGET (host:port of a KServe v2 gRPC server: mmaas, Triton, MLServer).",
    "ci": "Continuous integration: which models changed, job summaries, local runs under act.",
    "cache": "Manage TensorRT timing caches, keyed by TensorRT version, compute capability, GPU.",
    "doctor": "Check Docker, BuildKit and what each back end needs (ONNX Runtime; GPUs and "
    "driver, the NVIDIA container runtime, TensorRT), and say which back ends can build "
    "images here.",
    "convert": "Convert a checkpoint into a model directory "
    '(needs `pip install "mmaas[convert]"`).',
}


class VerbGroup(click.Group):
    """The root group: the verbs of :data:`VERBS`, each imported when it is named."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every verb, sorted (``mmaas --help``)."""
        return sorted(VERBS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The verb's command, importing its module; None for an unknown verb."""
        if cmd_name not in VERBS:
            return None
        command: click.Command = importlib.import_module(f"mmaas.cli.{cmd_name}").command
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The "Commands" section of ``mmaas --help`` from :data:`VERBS`, importing no verb:
        what Click writes from the imported commands, each help shortened to the width left
        beside the longest verb name by Click's own rule (its first sentence, then ``...``)."""
        limit = formatter.width - 6 - max(map(len, VERBS))
        rows = [
            (verb, click.Command(verb, help=VERBS[verb]).get_short_help_str(limit))
            for verb in self.list_commands(ctx)
        ]
        with formatter.section(gettext("Commands")):
            formatter.write_dl(rows)


@click.group(
    cls=VerbGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="mmaas")
@click.option("--debug", is_flag=True, help="Show the full traceback of any error.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """mmaas: turn an ONNX model + model.yaml into a hash-checked KServe v2 inference image.

    \b
    Typical use:
      mmaas init models/my-model --onnx my-model.onnx   # write a model.yaml
      mmaas validate models/my-model                    # check it against the ONNX graph
      mmaas build models/my-model                       # build the serving image
    """
    ctx.obj = {"debug": debug}


def error_report(exc: MmaasError) -> dict[str, object]:
    """The JSON form of an expected error (see :func:`main`)."""
    problems = [asdict(p) for p in exc.problems] if isinstance(exc, SpecError) else []
    return {
        "ok": False,
        "error": type(exc).__name__,
        "message": exc.message,
        "hint": exc.hint,
        "exit_code": exc.exit_code,
        "problems": problems,
    }


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the CLI, map errors to messages and exit codes.

    With ``--json``, an expected error is also printed on stdout as
    ``{"ok": false, "error": CLASS, "message", "hint", "exit_code", "problems": [...]}``
    (``problems``: a spec error's located problems), so scripts always get JSON."""
    words = argv if argv is not None else sys.argv[1:]
    debug = "--debug" in words
    try:
        code = cli.main(args=argv, prog_name="mmaas", standalone_mode=False)
    except MmaasError as exc:
        if debug:
            traceback.print_exc()
        if "--json" in words:
            click.echo(json.dumps(error_report(exc), indent=2))
        click.secho(f"error: {exc}", fg="red", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)
        sys.exit(INTERRUPTED_EXIT)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(INTERRUPTED_EXIT)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except Exception:  # a bug: keep the report, show one line
        report = Path(tempfile.mkstemp(prefix="mmaas-crash-", suffix=".log")[1])
        report.write_text(traceback.format_exc())
        if debug:
            traceback.print_exc()
        click.secho(f"internal error (a bug in mmaas); full report in {report}", fg="red", err=True)
        sys.exit(BUG_EXIT)
    sys.exit(code if isinstance(code, int) else 0)  # a verb's ctx.exit(N)
