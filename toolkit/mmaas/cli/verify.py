"""``mmaas verify IMAGE|DIR``: re-check an image's or a model directory's engine hashes."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click

from mmaas.build.verify import verify_image
from mmaas.cli.options import json_option
from mmaas.core.errors import UsageError
from mmaas.core.model_dir import describe, verify_model_dir
from mmaas.core.model_manifest import engine_set_digest


@click.command("verify")
@click.argument("target")
@json_option
def command(target: str, as_json: bool) -> None:
    """Verify TARGET: a model directory (manifest.json + engine) or a local image.

    Checks the manifest's self-digest, the blake3, sha256 and size of every engine, engine
    data file and asset, and for an image that its io.mmaas.* identity labels match. Exit
    1 on any mismatch.
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
        engines = {
            entry.name: {
                "model": entry.manifest.model.name,
                "directory": entry.directory,
                "engine": asdict(entry.manifest.engine),
                "engine_data": [asdict(record) for record in entry.manifest.engine_data],
            }
            for entry in manifest.engines
        }
        single = manifest.engines[0].manifest if len(manifest.engines) == 1 else None
        click.echo(
            json.dumps(
                {
                    "target": target,
                    "ok": True,
                    "model": manifest.name,
                    "version": manifest.version,
                    "engine": asdict(single.engine) if single else None,
                    "engine_data": [asdict(r) for r in single.engine_data] if single else None,
                    "engines": engines,
                    "assets": {a.name: asdict(a.file) for a in manifest.assets},
                    "engine_set": engine_set_digest(manifest),
                    "manifest_digest": manifest.manifest_digest,
                },
                indent=2,
            )
        )
        return
    click.echo(
        f"ok: {target}: {manifest.name} {manifest.version}: {describe(manifest)} match its manifest"
    )
