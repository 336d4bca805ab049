"""``mmaas render MODEL``: print the Dockerfile(s) and the exact build commands, build nothing.

Both back ends: the compile Dockerfile of every engine and the package Dockerfile on
stdout, each after a ``# ==> DIR/<build>/Dockerfile (<phase> build) <==`` line; on stderr
the commands the back end's build target says ``mmaas build`` runs
(:meth:`mmaas.backends.targets.BuildTarget.build_commands`: ONNX Runtime's compile build,
the copy of its engine directory, the package build; TensorRT's GPU route: build
``--target builder``, compile in ``docker run --gpus all``, copy the engine directory into
the package context, build the package), one shell line each after a ``# N/M what``
comment, then the compile's own command where the back end has one (TensorRT: the exact
trtexec argv the compile container runs,
:meth:`~mmaas.backends.targets.BuildTarget.engine_command`). The build contexts are
staged in ``--context DIR`` (``DIR/compile``, or ``DIR/compile/<engine>`` for several
engines, and ``DIR/package``), else in
``MODEL/.mmaas/render`` (replaced each time), so every printed path is real and the
commands run as pasted on a host with Docker (and, for TensorRT, a GPU and the NVIDIA
Container Toolkit). Several engines: each engine's commands in turn, its directory copied
to ``package/engine/<engine>`` (the assets are staged there already), then the one package
build.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from mmaas.cli.options import ca_bundle_option
from mmaas.core.errors import UsageError

if TYPE_CHECKING:
    from mmaas.backends.targets import BuildCommand
    from mmaas.build.plan import BuildPlan
    from mmaas.spec.load import LoadedSpec

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
    from mmaas.build import docker as docker_engine
    from mmaas.build.command import engine_commands
    from mmaas.build.context import plan_builds
    from mmaas.build.render import render_dockerfile

    if context_dir is not None and context_dir.exists():
        raise UsageError(
            f"--context {context_dir}: already exists",
            hint="name a folder that does not exist yet (render creates it and stages the "
            "build contexts in it), or remove this one",
        )
    loaded, compiles, package_plan = plan_builds(model, ca_bundle=ca_bundle, buildkit=buildkit)
    commands = engine_commands(loaded)  # the build targets' checks, located in model.yaml
    root = context_dir.resolve() if context_dir else loaded.model_dir.resolve() / RENDER_DIR
    if not context_dir:
        shutil.rmtree(root, ignore_errors=True)  # mmaas's own folder, remade each time
    single = len(compiles) == 1
    contexts = {name: root / ("compile" if single else f"compile/{name}") for name in compiles}
    package = root / "package"
    for name, plan in compiles.items():
        _stage(plan, contexts[name])
    _stage(package_plan, package)
    use_buildkit = bool(package_plan.values["buildkit"])
    docker = [_docker_binary(buildkit)]

    def build_args(dockerfile: Path, tag: str, target: str | None) -> list[str]:
        return docker_engine.build_args(dockerfile, tag, {}, target, use_buildkit)

    for plan, context in (*((compiles[n], contexts[n]) for n in compiles), (package_plan, package)):
        click.echo(f"# ==> {context / 'Dockerfile'} ({plan.values['phase']} build) <==")
        click.echo(render_dockerfile(plan), nl=False)
    steps = _steps(loaded, docker, build_args, contexts, package, package_plan.image, use_buildkit)
    click.echo(f"# what `mmaas build` runs (contexts staged in {root}):", err=True)
    for number, step in enumerate(steps, 1):
        click.echo(f"# {number}/{len(steps)} {step.what}\n{step.shell()}", err=True)
    for name, command in commands.items():
        if command:
            engine = "" if single else f" of engine {name}"
            click.echo(
                f"# the compile command{engine} the builder stage runs, in its engine "
                f"directory:\n#   {shlex.join(command)}",
                err=True,
            )
    click.echo(HOST_STEPS.format(image=package_plan.image), err=True)


def _steps(
    loaded: LoadedSpec,
    docker: list[str],
    build_args: Callable[[Path, str, str | None], list[str]],
    contexts: dict[str, Path],
    package: Path,
    image: str,
    buildkit: bool,
) -> list[BuildCommand]:
    """Each engine's commands as its back end gives them (the engine directory copied to
    its folder of the package context), the package build once, last."""
    from mmaas.backends import get_target
    from mmaas.backends.targets import ENGINE_CONTEXT

    env = {"DOCKER_BUILDKIT": str(int(buildkit))}
    steps: list[BuildCommand] = []
    for engine in loaded.engines:
        target = get_target(engine.spec.backend)
        pair = (contexts[engine.name], package)
        own = target.build_commands(engine.spec, docker, build_args, pair, image, env)
        package_build = own.pop()  # the same for every engine: printed once, unprefixed
        folder = loaded.engine_folder(engine.name)
        if folder != ".":
            into, there = str(package / ENGINE_CONTEXT), str(package / ENGINE_CONTEXT / folder)
            own = [
                replace(step, what=f"engine {engine.name}: {step.what}",
                        argv=[there if arg == into else arg for arg in step.argv])
                for step in own
            ]  # fmt: skip
        steps += own
    return [*steps, package_build]


def _docker_binary(buildkit: bool | None) -> str:
    """The client ``mmaas build`` would use; without asking Docker (``--buildkit`` or
    ``--no-buildkit`` given): ``$MMAAS_DOCKER``, else ``docker`` on PATH."""
    from mmaas.build import docker as docker_engine

    if buildkit is None:
        return docker_engine.client().binary
    return os.environ.get("MMAAS_DOCKER") or shutil.which("docker") or "docker"


def _stage(plan: BuildPlan, context: Path) -> None:
    """Stage ``plan``'s context in the new directory ``context``, without the engine
    directories (the compiles write them; the printed commands copy them in): the assets
    are staged."""
    from mmaas.build.context import stage_context

    context.mkdir(parents=True)
    files = tuple(f for f in plan.files if not _engine_path(f.target))
    stage_context(replace(plan, files=files), context)


def _engine_path(target: str) -> bool:
    from mmaas.backends.targets import ENGINE_CONTEXT
    from mmaas.core.model_manifest import ASSETS_DIR

    parts = target.split("/")
    return parts[0] == ENGINE_CONTEXT and (len(parts) == 1 or parts[1] != ASSETS_DIR)
