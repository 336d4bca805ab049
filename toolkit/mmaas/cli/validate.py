"""``mmaas validate MODEL``: check a model.yaml against its ONNX model, print the result."""

from __future__ import annotations

import json
import shlex

import click

from mmaas.build.command import engine_command
from mmaas.cli.options import json_option
from mmaas.spec.catalog import resolve_model
from mmaas.spec.load import LoadedSpec, load_spec
from mmaas.spec.model import InputSpec, OutputSpec


@click.command("validate")
@click.argument("model")
@json_option
def command(model: str, as_json: bool) -> None:
    """Validate MODEL (a model folder or its model.yaml) against its ONNX graph.

    Prints the completed spec (datatypes, shapes and profiles filled from the model) and
    the compile's command (TensorRT: the trtexec argv of the pinned release), or every
    problem as file:line:col: key.path: what is wrong, what to do (exit 2), including what
    the back end refuses before a build (flags the pinned TensorRT release lacks). With
    --json, stdout gets {"ok": true, "spec": ..., "engine_command": [...] | null} or
    {"ok": false, "problems": [...]}.
    """
    path = resolve_model(model)
    loaded = load_spec(path)  # a SpecError reaches the CLI's handler (JSON with --json)
    command = engine_command(loaded)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "ok": True,
                    "path": str(path),
                    "source": str(loaded.source_path),
                    "digest": loaded.spec.digest(),
                    "spec": loaded.spec.model_dump(mode="json"),
                    "engine_command": command,
                },
                indent=2,
            )
        )
    else:
        click.echo(summary(loaded) + (f"\n  compile: {shlex.join(command)}" if command else ""))


def summary(loaded: LoadedSpec) -> str:
    """A few human lines: the model, its source and every input (with its profile) and
    output."""
    spec = loaded.spec
    lines = [
        f"ok: {loaded.path}: {spec.name} {spec.version} ({spec.backend}, "
        f"{spec.target_precision}, max_batch_size {spec.max_batch_size})",
        f"  source: {loaded.source_path}",
    ]
    lines += [_tensor_line("input", tensor) for tensor in spec.inputs]
    lines += [_tensor_line("output", tensor) for tensor in spec.outputs]
    return "\n".join(lines)


def _tensor_line(role: str, tensor: InputSpec | OutputSpec) -> str:
    line = f"  {role:<6} {tensor.name} {tensor.datatype} {tensor.shape}"
    if isinstance(tensor, InputSpec):
        for key in ("min", "opt", "max"):
            line += f"  {key} {'x'.join(map(str, getattr(tensor, key) or ())) or 'scalar'}"
    return line
