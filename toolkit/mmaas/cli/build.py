"""``mmaas build MODEL``: build, verify and label MODEL's serving image."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click

from mmaas.cli.options import ca_bundle_option, json_option
from mmaas.pipeline import build_image


@click.command("build")
@click.argument("model", type=click.Path(path_type=Path))
@ca_bundle_option
@click.option("--revision",
              help="Source revision for the org.opencontainers.image.revision label.")
@json_option
def command(model: Path, ca_bundle: Path | None, revision: str | None, as_json: bool) -> None:
    """Build MODEL (a folder holding model.yaml, or the model.yaml itself) into an image.

    Progress streams to stderr; the image tag and id are printed on stdout.
    """
    result = build_image(model, ca_bundle=ca_bundle, revision=revision)
    if as_json:
        click.echo(json.dumps({"image": result.image, "image_id": result.image_id,
                               "engine": asdict(result.manifest.engine),
                               "labels": result.labels, "plan_digest": result.plan_digest,
                               "seconds": result.seconds}, indent=2))
        return
    click.echo(f"built {result.image} ({result.image_id}) in {result.seconds:.1f} s")
    click.echo(f"engine {result.manifest.engine.path} {result.manifest.engine.blake3}")
