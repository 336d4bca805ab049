"""``mmaas validate MODEL``: check a model.yaml against its ONNX model, print the result."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import click

from mmaas.cli.options import json_option

if TYPE_CHECKING:
    from mmaas.core.manifest import TensorInfo
    from mmaas.spec.load import LoadedSpec
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
    --json, stdout gets {"ok": true, "spec": ..., "source": path | null (one engine),
    "engine_command": [...] | null (one engine), "engine_commands": {engine: [...] |
    null}, "engines": {engine: {"served_as", "source"}}, "assets": {name: path},
    "pipeline": {"kind", "served_as", "inputs", "outputs"} | null} or {"ok": false,
    "problems": [...]}.
    """
    from mmaas.build.command import engine_commands
    from mmaas.build.spec_checks import host_checks
    from mmaas.spec.catalog import resolve_model
    from mmaas.spec.load import load_spec

    path = resolve_model(model)
    # a SpecError reaches the CLI's handler (JSON with --json)
    loaded = load_spec(path, checks=host_checks())
    commands = engine_commands(loaded)
    command = next(iter(commands.values())) if len(commands) == 1 else None
    if as_json:
        click.echo(
            json.dumps(
                {
                    "ok": True,
                    "path": str(path),
                    "source": str(loaded.source_path) if len(loaded.engines) == 1 else None,
                    "digest": loaded.spec.digest(),
                    "spec": loaded.spec.model_dump(mode="json"),
                    "engine_command": command,
                    "engine_commands": commands,
                    "engines": {
                        e.name: {"served_as": e.spec.name, "source": str(e.source_path)}
                        for e in loaded.engines
                    },
                    "assets": {name: str(path) for name, path in loaded.assets.items()},
                    "pipeline": _pipeline(loaded),
                },
                indent=2,
            )
        )
    else:
        click.echo(summary(loaded, commands))


def _pipeline(loaded: LoadedSpec) -> dict[str, Any] | None:
    """The pipeline model's kind, served name and signature (KServe v2 tensors)."""
    record = loaded.pipeline
    if record is None:
        return None
    tensors = [("inputs", record.model.inputs), ("outputs", record.model.outputs)]
    return {
        "kind": record.kind,
        "served_as": record.model.name,
        **{role: [_tensor(t) for t in found] for role, found in tensors},
    }


def _tensor(tensor: TensorInfo) -> dict[str, Any]:
    return {"name": tensor.name, "datatype": tensor.datatype, "shape": list(tensor.shape)}


def summary(loaded: LoadedSpec, commands: Mapping[str, list[str] | None]) -> str:
    """A few human lines: the model, then per engine its source, every input (with its
    profile) and output and its compile command; the assets and the pipeline model."""
    spec = loaded.spec
    several = spec.engines is not None
    lines = [f"ok: {loaded.path}: {spec.name} {spec.version}" + (":" if several else "")]
    for engine in loaded.engines:
        view = engine.spec
        facts = f"({view.backend}, {view.target_precision}, max_batch_size {view.max_batch_size})"
        if several:
            lines.append(f"  engine {engine.name} {facts}, served as {view.name}")
        else:
            lines[0] += f" {facts}"
        lines.append(f"  source: {engine.source_path}")
        lines += [_tensor_line("input", tensor) for tensor in view.inputs]
        lines += [_tensor_line("output", tensor) for tensor in view.outputs]
        if commands.get(engine.name):
            lines.append(f"  compile: {shlex.join(commands[engine.name] or [])}")
    lines += [f"  asset {name}: {path}" for name, path in loaded.assets.items()]
    if loaded.pipeline is not None:
        model = loaded.pipeline.model
        lines.append(f"  pipeline {loaded.pipeline.kind} (served as {model.name})")
        lines += [f"  input  {t.name} {t.datatype} {list(t.shape)}" for t in model.inputs]
        lines += [f"  output {t.name} {t.datatype} {list(t.shape)}" for t in model.outputs]
    return "\n".join(lines)


def _tensor_line(role: str, tensor: InputSpec | OutputSpec) -> str:
    from mmaas.spec.model import InputSpec

    line = f"  {role:<6} {tensor.name} {tensor.datatype} {tensor.shape}"
    if isinstance(tensor, InputSpec):
        for key in ("min", "opt", "max"):
            line += f"  {key} {'x'.join(map(str, getattr(tensor, key) or ())) or 'scalar'}"
    return line
