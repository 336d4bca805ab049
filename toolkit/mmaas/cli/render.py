"""``mmaas render MODEL``: print the Dockerfile(s) and the exact build commands, build nothing.

Both back ends: the compile and the package Dockerfile on stdout, each after a
``# ==> DIR/<build>/Dockerfile (<phase> build) <==`` line; on stderr the commands the
back end's build target says ``mmaas build`` runs (:meth:`mmaas.backends.BuildTarget.
build_commands`: ONNX Runtime's compile build, the copy of its engine directory, the
package build; TensorRT's GPU route: build ``--target builder``, compile in ``docker run
--gpus all``, copy the engine directory into the package context, build the package), one
shell line each after a ``# N/M what`` comment, then the compile's own command where the
back end has one (TensorRT: the exact trtexec argv the compile container runs,
:meth:`~mmaas.backends.BuildTarget.engine_command`). The build contexts are staged in
``--context DIR`` (``DIR/compile``, ``DIR/package``), else in ``MODEL/.mmaas/render``
(replaced each time), so every printed path is real and the commands run as pasted on a
host with Docker (and, for TensorRT, a GPU and the NVIDIA Container Toolkit).
"""

from __future__ import annotations

import os
import shlex
import shutil
from dataclasses import replace
from pathlib import Path

import click

from mmaas.backends import get_target
from mmaas.build import docker as docker_engine
from mmaas.build.command import engine_command
from mmaas.build.pipeline import plan_model, stage_context
from mmaas.build.plan import ENGINE_CONTEXT, BuildPlan
from mmaas.build.render import render_dockerfile
from mmaas.cli.options import ca_bundle_option

RENDER_DIR = Path(".mmaas") / "render"
HOST_STEPS = (
    "# then `mmaas build` itself copies /opt/mmaas/model out of {image}, verifies it and\n"
    "# labels the image with the engine's identity (io.mmaas.engine.blake3 ...), known only\n"
    "# after the build: an image made by the commands above lacks those labels; check its\n"
    "# model directory with `mmaas verify DIR` after `docker cp`"
)


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
    help="Stage the build contexts in DIR/compile and DIR/package (DIR must not exist; "
    "default: MODEL/.mmaas/render, replaced) so the printed commands run as is.",
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
    command = engine_command(loaded)  # the build target's checks, located in model.yaml
    root = context_dir.resolve() if context_dir else loaded.model_dir.resolve() / RENDER_DIR
    if not context_dir:
        shutil.rmtree(root, ignore_errors=True)  # mmaas's own folder, remade each time
    contexts = (root / "compile", root / "package")
    _stage(compile_plan, contexts[0])
    _stage(package_plan, contexts[1])
    use_buildkit = bool(compile_plan.values["buildkit"])
    docker = [_docker_binary(buildkit)]

    def build_args(dockerfile: Path, tag: str, target: str | None) -> list[str]:
        return docker_engine.build_args(dockerfile, tag, {}, target, use_buildkit)

    for plan, context in ((compile_plan, contexts[0]), (package_plan, contexts[1])):
        click.echo(f"# ==> {context / 'Dockerfile'} ({plan.values['phase']} build) <==")
        click.echo(render_dockerfile(plan), nl=False)
    target = get_target(loaded.spec.backend)
    steps = target.build_commands(
        loaded.spec,
        docker,
        build_args,
        contexts,
        package_plan.image,
        {"DOCKER_BUILDKIT": str(int(use_buildkit))},
    )
    click.echo(f"# what `mmaas build` runs (contexts staged in {root}):", err=True)
    for number, step in enumerate(steps, 1):
        click.echo(f"# {number}/{len(steps)} {step.what}\n{step.shell()}", err=True)
    if command:
        click.echo(
            f"# the compile command the builder stage runs, in its engine directory:\n"
            f"#   {shlex.join(command)}",
            err=True,
        )
    click.echo(HOST_STEPS.format(image=package_plan.image), err=True)


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
