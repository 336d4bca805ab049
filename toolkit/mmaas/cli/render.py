"""``mmaas render MODEL``: print the Dockerfile and the exact build command, build nothing."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from mmaas import docker_engine
from mmaas.cli.options import ca_bundle_option
from mmaas.pipeline import plan_model
from mmaas.render import render_dockerfile


@click.command("render")
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--buildkit/--no-buildkit", default=None,
              help="Render for BuildKit (cache mounts) or the legacy builder "
                   "(default: ask Docker).")
@ca_bundle_option
def command(model: Path, buildkit: bool | None, ca_bundle: Path | None) -> None:
    """Print MODEL's Dockerfile (stdout) and its docker build command (stderr)."""
    _, plan = plan_model(model, ca_bundle=ca_bundle, buildkit=buildkit)
    click.echo(render_dockerfile(plan), nl=False)
    docker = docker_engine.client().binary if buildkit is None else "docker"
    binary = f"DOCKER_BUILDKIT={1 if plan.values['buildkit'] else 0} {docker}"
    args = docker_engine.build_args(Path("CONTEXT/Dockerfile"), plan.image, {}, None,
                                    plan.values["buildkit"])
    click.echo(f"# build: {binary} build {shlex.join(args)} CONTEXT", err=True)
    click.echo("# CONTEXT holds: " + ", ".join(sorted(
        {f.target.split('/')[0] for f in plan.files} | set(plan.generated))), err=True)
