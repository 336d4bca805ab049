"""``mmaas verify IMAGE|DIR``: re-check an image's or a model directory's engine hashes,
labels and, with ``--key``, its signature; ``--pull`` first pulls a digest-pinned image."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click

from mmaas.cli.options import json_option
from mmaas.core.errors import UsageError


@click.command("verify")
@click.argument("target")
@click.option(
    "--key",
    "keys",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Trusted Ed25519 public key (PEM; repeat for several): the manifest must be "
    "signed by one of them.",
)
@click.option(
    "--pull",
    is_flag=True,
    help="Pull TARGET (REGISTRY/NAME@sha256:<hex>, pinned by digest) first "
    "(credentials: $MMAAS_REGISTRY_USER/_PASSWORD or docker login).",
)
@json_option
def command(target: str, keys: tuple[Path, ...], pull: bool, as_json: bool) -> None:
    """Verify TARGET: a model directory (manifest.json + engine) or a local image.

    Checks the manifest's self-digest, the blake3, sha256 and size of every engine, engine
    data file and asset; for an image that its io.mmaas.* identity and signature labels
    match, that every file its signed listing holds (the server's code, its interpreter,
    the SBOM, the model directory) is in the image unchanged and nothing was added, and
    that it starts the server as built; with --key that a trusted key signed the manifest
    (an image must then carry the listing). Exit 1 on any mismatch.
    """
    from mmaas.build.pull import pull_image
    from mmaas.build.registry_calls import credentials_from_env
    from mmaas.build.verify import verify_image, verify_model
    from mmaas.core.model_dir import describe
    from mmaas.core.model_manifest import engine_set_digest
    from mmaas.core.signing import trusted_keys

    trusted = ",".join(str(key) for key in keys) or None
    if trusted:
        trusted_keys(trusted)  # a bad key file is a usage error, whatever TARGET holds
    directory = Path(target)
    if pull:
        target = pull_image(target, credentials=credentials_from_env())
    elif directory.is_dir() and not (directory / "manifest.json").is_file():
        built = directory / ".mmaas" / "engine"
        raise UsageError(
            f"{directory} is not a model directory (no manifest.json)",
            hint="give a local image (mmaas/<name>:<version>) or a model directory"
            + (f", e.g. {built} (compiled by `mmaas serve`)" if built.is_dir() else ""),
        )
    local = directory.is_dir() and not pull
    checked = verify_model(directory, trusted, target) if local else verify_image(target, trusted)
    manifest, listing = checked.manifest, checked.listing
    signer = checked.signer.key_id if checked.signer else None
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
                    "provenance": manifest.build.get("provenance"),
                    "signed_by": checked.signature.key_id if checked.signature else None,
                    "trusted_key": signer,
                    "image_files": len(listing.files) if listing else None,
                },
                indent=2,
            )
        )
        return
    click.echo(
        f"ok: {target}: {manifest.name} {manifest.version}: {describe(manifest)} match its manifest"
        + (f", and its {len(listing.files)} image files their listing" if listing else "")
        + (f"; signed by trusted key {signer}" if signer else "")
    )
