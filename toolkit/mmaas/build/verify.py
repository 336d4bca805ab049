"""Checks of a built image on the host: its model directory verified against the
manifest, and the engine-identity labels (``io.mmaas.engine.blake3`` ...) compared with the
manifest, so an image whose labels, manifest and engine disagree is never tagged and
``mmaas verify`` can re-check one later.

Labels (docs/design.md, "Image labels"): ``io.mmaas.engine.blake3`` / ``.sha256`` are the
engine-set digest (:func:`mmaas.core.model_manifest.engine_set_digest`: one engine's own
file digest, as always; several engines' combined digest), which ``MMAAS_EXPECTED_ENGINE``
pins; ``io.mmaas.manifest.digest``; for a single engine with data files
``io.mmaas.engine-data.blake3``; for engines in folders of their own, per engine
``io.mmaas.engine.<engine>.blake3`` / ``.sha256`` / ``.data.blake3``; per asset
``io.mmaas.asset.<asset>.blake3``. A signed image's signature file and labels must agree,
and with trusted keys the signature must hold (:mod:`mmaas.core.signing`). The image's
files are compared with the file listing its manifest records (:mod:`mmaas.core.image_seal`),
read from the image's bytes (:mod:`mmaas.build.image_files`), and so is how it starts:
labels are checked against those bytes, never trusted in their place."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from mmaas.build import docker as docker_engine
from mmaas.build.image_files import observe_image
from mmaas.build.plan import MODEL_DIR
from mmaas.build.signing import check_signature_labels
from mmaas.core.errors import IntegrityError, MmaasError
from mmaas.core.file_listing import Listing, check
from mmaas.core.image_seal import check_launch, read_listing
from mmaas.core.model_dir import verify_model_dir
from mmaas.core.model_manifest import ModelManifest, engine_set_digest
from mmaas.core.signing import PublicKey, Signature, read_signature, verify_trusted


def identity_labels(manifest: ModelManifest) -> dict[str, str]:
    """The labels that must equal the manifest (see the module docstring); engine data
    digests are comma-separated, in manifest order."""
    labels = {
        "io.mmaas.engine.blake3": engine_set_digest(manifest, "blake3"),
        "io.mmaas.engine.sha256": engine_set_digest(manifest, "sha256"),
        "io.mmaas.manifest.digest": manifest.manifest_digest,
    }
    for entry in manifest.engines:
        engine, data = entry.manifest, ",".join(f.blake3 for f in entry.manifest.engine_data)
        if entry.directory == ".":
            labels.update({"io.mmaas.engine-data.blake3": data} if data else {})
            continue
        prefix = f"io.mmaas.engine.{entry.name}"
        labels[f"{prefix}.blake3"] = engine.engine.blake3
        labels[f"{prefix}.sha256"] = engine.engine.sha256
        labels.update({f"{prefix}.data.blake3": data} if data else {})
    for asset in manifest.assets:
        labels[f"io.mmaas.asset.{asset.name}.blake3"] = asset.file.blake3
    return labels


def engine_labels(
    manifest: ModelManifest, plan_digest: str, revision: str | None
) -> dict[str, str]:
    """Labels that identify the engine inside the image (known only after the build)."""
    labels = {**identity_labels(manifest), "io.mmaas.plan.digest": plan_digest}
    if revision:
        labels["org.opencontainers.image.revision"] = revision
    return labels


@dataclass(frozen=True)
class VerifiedModel:
    """A verified image or model directory: its manifest, its signature (None: unsigned),
    the trusted key that signed it (None when no keys were given) and, for an image, the
    file listing its files were checked against (None: an unsealed image)."""

    manifest: ModelManifest
    signature: Signature | None = None
    signer: PublicKey | None = None
    listing: Listing | None = None


def verify_image(image: str, trusted_keys: str | None = None) -> VerifiedModel:
    """Copy the model directory out of ``image``, verify it on this host, compare the
    image's labels with the manifest and its signature file, then every file its listing
    holds with the image's bytes and its entrypoint and environment with the server's; with
    ``trusted_keys`` (PEM files, comma-separated, as ``MMAAS_TRUSTED_KEYS`` takes them) the
    signature must be made by one of them, and the image must have a listing.

    Raises:
        IntegrityError: engine, manifest, labels, signature and files disagree, the image
            starts otherwise, or (with keys) it is unsigned, signed by another key or
            unsealed. DockerError: no such image.
        UsageError: a key file holds no Ed25519 public key.
    """
    with tempfile.TemporaryDirectory(prefix="mmaas-verify-") as scratch:
        model_dir = docker_engine.copy_from_image(image, MODEL_DIR, Path(scratch) / "model")
        try:
            checked = verify_model(model_dir, trusted_keys, image)
            listing = read_listing(model_dir, checked.manifest)
        except MmaasError as exc:  # name the file in the image, not the scratch copy
            exc.message = exc.message.replace(str(model_dir), f"{image}:{MODEL_DIR}")
            raise
    check_labels(image, checked.manifest)
    check_signature_labels(image, docker_engine.image_labels(image), checked.signature)
    if listing is not None:
        check(listing, observe_image(image, listing), image)
        check_launch(image, docker_engine.inspect_image(image).get("Config") or {}, listing)
    elif trusted_keys:
        raise IntegrityError(
            f"{image}: its manifest has no image file listing, so the signature covers the "
            "engines but not the code that runs them; refusing it",
            hint="rebuild the image with this mmaas (`mmaas build --sign KEY`)",
        )
    return replace(checked, listing=listing)


def verify_model(directory: Path, trusted_keys: str | None, where: str) -> VerifiedModel:
    """Verify the model directory ``directory`` (manifest, engine files) and, with
    ``trusted_keys``, its signature (``where`` names it in messages).

    Raises:
        IntegrityError, UsageError: as :func:`verify_image`.
    """
    manifest = verify_model_dir(directory)
    signature = read_signature(directory)
    if not trusted_keys:
        return VerifiedModel(manifest, signature)
    signer = verify_trusted(directory, manifest.manifest_digest, trusted_keys, where)
    return VerifiedModel(manifest, signature, signer)


def check_labels(image: str, manifest: ModelManifest) -> None:
    """Raise IntegrityError when ``image``'s engine labels differ from ``manifest``."""
    labels = docker_engine.image_labels(image)
    expected = identity_labels(manifest)
    wrong = {k: labels.get(k) for k, v in expected.items() if labels.get(k) != v}
    if wrong:
        details = ", ".join(f"{k}={v!r} (manifest: {expected[k]})" for k, v in wrong.items())
        raise IntegrityError(f"{image}: labels disagree with the engine manifest: {details}")
