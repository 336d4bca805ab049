"""``mmaas render MODEL``: print the Dockerfile(s) and the exact build commands, build nothing.

Both back ends: the compile and the package Dockerfile on stdout, each after a
``# ==> CONTEXT/<build>/Dockerfile (<phase> build) <==`` line; on stderr the commands the
back end's build target says ``mmaas build`` runs (:meth:`mmaas.backends.BuildTarget.
build_commands`: ONNX Runtime's two ``docker build`` commands; TensorRT's GPU route:
build ``--target builder``, compile in ``docker run --gpus all``, copy the engine directory
into the package context, build the package). ``--context DIR`` stages the build contexts
(``DIR/compile``, ``DIR/package``) so that the printed commands run as they are on a host
with Docker (and, for TensorRT, a GPU and the NVIDIA Container Toolkit).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path

import click

from mmaas.backends import get_target
from mmaas.build import docker as docker_engine
from mmaas.build.pipeline import plan_model, stage_context
from mmaas.build.plan import ENGINE_CONTEXT, BuildPlan
from mmaas.build.render import render_dockerfile
from mmaas.cli.options import ca_bundle_option


@click.command("render")
@click.argument("model", type=click.Path(path_type=Path))
@click.option(
    "--buildkit/--no-buildkit",
    default=None,
    help="Render for BuildKit (cache mounts) or the legacy builder (default: ask Docker).",
)
@click.option(
    "--context",
    "context_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Stage the build contexts in DIR/compile and DIR/package "
    "(DIR must not exist) so the printed commands run as is.",
)
@ca_bundle_option
def command(
    model: Path, buildkit: bool | None, context_dir: Path | None, ca_bundle: Path | None
) -> None:
    """Print MODEL's Dockerfile(s) (stdout) and its build commands (stderr)."""
    loaded, compile_plan = plan_model(model, ca_bundle=ca_bundle, buildkit=buildkit)
    _, package_plan = plan_model(
        model, ca_bundle=ca_bundle, buildkit=buildkit, engine_dir=Path(ENGINE_CONTEXT)
    )
    root = context_dir.resolve() if context_dir else Path("CONTEXT")
    contexts = (root / "compile", root / "package")
    if context_dir:
        _stage(compile_plan, contexts[0])
        _stage(package_plan, contexts[1])
    use_buildkit = bool(compile_plan.values["buildkit"])
    docker = [_docker_binary(buildkit)]
    env = f"DOCKER_BUILDKIT={int(use_buildkit)} "

    def build_args(dockerfile: Path, tag: str, target: str | None) -> list[str]:
        return docker_engine.build_args(dockerfile, tag, {}, target, use_buildkit)

    for plan, context in ((compile_plan, contexts[0]), (package_plan, contexts[1])):
        click.echo(f"# ==> {context / 'Dockerfile'} ({plan.values['phase']} build) <==")
        click.echo(render_dockerfile(plan), nl=False)
    target = get_target(loaded.spec.backend)
    commands = target.build_commands(
        loaded.spec, docker, build_args, contexts, package_plan.image, env
    )
    for line in commands:
        click.echo(f"# {line}", err=True)
    if not context_dir:
        for plan, context in ((compile_plan, contexts[0]), (package_plan, contexts[1])):
            click.echo(
                f"# {context} holds: "
                + ", ".join(
                    sorted(
                        {f.target.split("/")[0] for f in plan.files}
                        | {w.target.split("/")[0] for w in plan.wheels}
                        | set(plan.generated)
                    )
                ),
                err=True,
            )


def _docker_binary(buildkit: bool | None) -> str:
    """The client ``mmaas build`` would use; without asking Docker (``--buildkit`` or
    ``--no-buildkit`` given): ``$MMAAS_DOCKER``, else ``docker`` on PATH."""
    if buildkit is None:
        return docker_engine.client().binary
    return os.environ.get("MMAAS_DOCKER") or shutil.which("docker") or "docker"


def _stage(plan: BuildPlan, context: Path) -> None:
    """Stage ``plan``'s context in the new directory ``context``, without the engine
    directory (the compile writes it; the printed commands copy it in)."""
    context.mkdir(parents=True)
    files = tuple(f for f in plan.files if f.target != ENGINE_CONTEXT)
    stage_context(replace(plan, files=files), context)
