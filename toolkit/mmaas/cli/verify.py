"""``mmaas verify IMAGE|DIR``: re-check an image's or a model directory's engine hashes."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click

from mmaas.build.verify import verify_image
from mmaas.cli.options import json_option
from mmaas.core.errors import UsageError
from mmaas.core.model_dir import verify_model_dir


@click.command("verify")
@click.argument("target")
@json_option
def command(target: str, as_json: bool) -> None:
    """Verify TARGET: a model directory (manifest.json + engine) or a local image.

    Checks the manifest's self-digest, the engine's blake3 and sha256, and for an image
    that its io.mmaas.engine.* labels match. Exit 1 on any mismatch.
    """
    directory = Path(target)
    if directory.is_dir() and not (directory / "manifest.json").is_file():
        built = directory / ".mmaas" / "engine"
        raise UsageError(
            f"{directory} is not a model directory (no manifest.json)",
            hint="give a local image (mmaas/<name>:<version>) or a model directory"
            + (f", e.g. {built} (compiled by `mmaas serve`)" if built.is_dir() else ""),
        )
    manifest = verify_model_dir(directory) if directory.is_dir() else verify_image(target)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "target": target,
                    "ok": True,
                    "model": manifest.model.name,
                    "version": manifest.model.version,
                    "engine": asdict(manifest.engine),
                    "engine_data": [asdict(record) for record in manifest.engine_data],
                    "manifest_digest": manifest.manifest_digest,
                },
                indent=2,
            )
        )
        return
    click.echo(
        f"ok: {target}: {manifest.model.name} {manifest.model.version} engine "
        f"{manifest.engine.path} {manifest.engine.blake3} matches its manifest"
    )
