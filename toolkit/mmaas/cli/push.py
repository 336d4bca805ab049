"""``mmaas push MODEL --registry HOST:PORT/NAMESPACE``: push MODEL's built image."""

from __future__ import annotations

import json
from pathlib import Path

import click

from mmaas.cli.options import json_option


@click.command("push")
@click.argument("model", type=click.Path(path_type=Path))
@click.option(
    "--registry",
    required=True,
    envvar="MMAAS_REGISTRY",
    show_envvar=True,
    help="HOST:PORT/NAMESPACE, e.g. 127.0.0.1:5000/mmaas or ghcr.io/my-org.",
)
@click.option(
    "--image",
    help="Local image to push (default: the one `mmaas build MODEL` "
    "tags, image.repository:image.tag from model.yaml).",
)
@click.option(
    "--attempts",
    type=click.IntRange(1, 10),
    default=3,
    show_default=True,
    help="Tries per registry call for transient failures (exponential backoff).",
)
@json_option
def command(model: Path, registry: str, image: str | None, attempts: int, as_json: bool) -> None:
    """Push MODEL's image as REGISTRY/NAME:VERSION and REGISTRY/NAME:blake3-<engine hash>.

    MODEL is a model folder or its model.yaml. Log-in: MMAAS_REGISTRY_USER and
    MMAAS_REGISTRY_PASSWORD when set (used for this push only, never stored), else
    Docker's own `docker login`. Prints the pushed digest (repository@sha256:...).
    """
    from mmaas.build.registry import parse_registry, push_image
    from mmaas.build.registry_calls import credentials_from_env
    from mmaas.build.spec_checks import host_checks
    from mmaas.spec.load import load_spec

    spec = load_spec(model, checks=host_checks()).spec
    result = push_image(
        image or f"{spec.image_repository}:{spec.image_tag}",
        parse_registry(registry),
        spec.name,
        spec.version,
        credentials=credentials_from_env(),
        attempts=attempts,
    )
    if as_json:
        click.echo(json.dumps({"model": spec.name, **result.to_json()}, indent=2))
        return
    click.echo(result.reference)
