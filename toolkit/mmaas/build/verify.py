"""Checks of a built image on the host: its model directory verified against the
manifest, and the engine-identity labels (``io.mmaas.engine.blake3`` ...) compared with the
manifest, so an image whose labels, manifest and engine disagree is never tagged and
``mmaas verify`` can re-check one later."""

from __future__ import annotations

import tempfile
from pathlib import Path

from mmaas.build import docker as docker_engine
from mmaas.build.plan import MODEL_DIR
from mmaas.core.errors import IntegrityError
from mmaas.core.manifest import Manifest
from mmaas.core.model_dir import verify_model_dir


def identity_labels(manifest: Manifest) -> dict[str, str]:
    """The labels that must equal the manifest: the engine's blake3 and sha256, the
    blake3 of each engine data file (comma-separated, in manifest order; absent when the
    engine is one file) and the manifest's own digest."""
    labels = {
        "io.mmaas.engine.blake3": manifest.engine.blake3,
        "io.mmaas.engine.sha256": manifest.engine.sha256,
        "io.mmaas.manifest.digest": manifest.manifest_digest,
    }
    if manifest.engine_data:
        labels["io.mmaas.engine-data.blake3"] = ",".join(f.blake3 for f in manifest.engine_data)
    return labels


def engine_labels(manifest: Manifest, plan_digest: str, revision: str | None) -> dict[str, str]:
    """Labels that identify the engine inside the image (known only after the build)."""
    labels = {**identity_labels(manifest), "io.mmaas.plan.digest": plan_digest}
    if revision:
        labels["org.opencontainers.image.revision"] = revision
    return labels


def verify_image(image: str) -> Manifest:
    """Copy the model directory out of ``image``, verify it on this host and compare the
    image's labels with the manifest.

    Raises:
        IntegrityError: engine, manifest and labels disagree. DockerError: no such image.
    """
    manifest = _verified_manifest(image)
    check_labels(image, manifest)
    return manifest


def check_labels(image: str, manifest: Manifest) -> None:
    """Raise IntegrityError when ``image``'s engine labels differ from ``manifest``."""
    labels = docker_engine.image_labels(image)
    expected = identity_labels(manifest)
    wrong = {k: labels.get(k) for k, v in expected.items() if labels.get(k) != v}
    if wrong:
        details = ", ".join(f"{k}={v!r} (manifest: {expected[k]})" for k, v in wrong.items())
        raise IntegrityError(f"{image}: labels disagree with the engine manifest: {details}")


def _verified_manifest(image: str) -> Manifest:
    with tempfile.TemporaryDirectory(prefix="mmaas-verify-") as scratch:
        return verify_model_dir(
            docker_engine.copy_from_image(image, MODEL_DIR, Path(scratch) / "model")
        )
