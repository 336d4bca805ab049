"""What an export starts from: the model's spec and its built image, verified.

The image is the local one ``mmaas build`` tagged (``image.repository:image.tag``), or the
one ``--image REPOSITORY@sha256:<hex>`` names (pulled beforehand, e.g. by ``mmaas verify
REF --pull``). Either way its model directory is copied out and verified against its
manifest and labels (:func:`mmaas.build.verify.verify_image`) before anything is written,
so an export never describes an image that was not built, or was altered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mmaas.build import docker as docker_engine
from mmaas.build.pull import pinned_reference
from mmaas.build.spec_checks import host_checks
from mmaas.build.verify import verify_image
from mmaas.core.errors import DockerError, UsageError
from mmaas.core.manifest import Manifest
from mmaas.core.model_manifest import ModelManifest
from mmaas.spec.load import load_spec
from mmaas.spec.model import ModelSpec

Say = Callable[[str], None]


@dataclass(frozen=True)
class ExportSource:
    """A model ready to export.

    Attributes:
        spec: the completed spec (model.yaml).
        model_dir: the model folder.
        local_image: the local image that was verified (tag or ``NAME@sha256:``).
        reference: what the exported objects pull: ``NAME@sha256:<hex>`` when the image
            was pushed (or ``--image`` named it), else the local tag.
        pinned: ``reference`` names a digest.
        manifest: the engine manifest of the image's one engine, verified with the model
            manifest against its files and labels.
        model_manifest: the image's model manifest (its ``manifest_digest`` is what a
            signature signs; its engine-set digest what ``MMAAS_EXPECTED_ENGINE`` pins).
        labels: the image's labels.
        onnx: the model's source ONNX file on this host (as model.yaml names it; checked
            against the manifest's source record where an export ships it).
    """

    spec: ModelSpec
    model_dir: Path
    local_image: str
    reference: str
    pinned: bool
    manifest: Manifest
    labels: dict[str, str]
    model_manifest: ModelManifest
    onnx: Path


def export_source(model: Path, image: str | None, say: Say) -> ExportSource:
    """Load ``model`` and verify its image (``image``: a digest-pinned reference, or None
    for the image ``mmaas build`` tagged). ``say`` gets one line when the reference the
    export writes is only a tag (never pushed: no digest is known).

    Raises:
        SpecError: model.yaml is invalid. UsageError: ``image`` has no digest, the image
            was never built (or pulled) here, or it serves another model.
        IntegrityError: the image's engine, manifest and labels disagree.
        DockerError: no Docker engine.
    """
    loaded = load_spec(model, checks=host_checks())
    spec = loaded.spec
    local = pinned_reference(image) if image else f"{spec.image_repository}:{spec.image_tag}"
    inspected = _inspected(local, model, image is not None)
    model_manifest = verify_image(local).manifest
    if model_manifest.name != spec.name:
        raise UsageError(
            f"image {local} serves model {model_manifest.name!r}, not {spec.name!r} "
            f"({loaded.path})",
            hint="name the image of this model, or export the model that image holds",
        )
    if len(model_manifest.engines) != 1 or model_manifest.assets or model_manifest.pipeline:
        raise UsageError(
            f"image {local} holds a model of {len(model_manifest.engines)} engines "
            f"({loaded.path}); mmaas export takes single-engine models so far",
            hint="export a model.yaml with one top-level source: and no engines:/assets:",
        )
    manifest = model_manifest.engines[0].manifest
    reference, pinned = (local, True) if image else _pushed(local, inspected, say)
    labels = dict((inspected.get("Config") or {}).get("Labels") or {})
    return ExportSource(
        spec,
        loaded.model_dir,
        local,
        reference,
        pinned,
        manifest,
        labels,
        model_manifest,
        loaded.source_path,
    )


def _inspected(local: str, model: Path, pinned: bool) -> dict:
    try:
        return docker_engine.inspect_image(local)
    except DockerError as exc:
        if "no image" not in exc.message:
            raise
        hint = (
            f"pull and verify it first: `mmaas verify {local} --pull`"
            if pinned
            else f"build it first: `mmaas build {model}` (or name a pushed image with "
            "--image REPOSITORY@sha256:<hex> after `mmaas verify REF --pull`)"
        )
        raise UsageError(f"image {local} was never built or pulled here", hint=hint) from None


def _pushed(local: str, inspected: dict, say: Say) -> tuple[str, bool]:
    digests = sorted(set(inspected.get("RepoDigests") or []))
    if len(digests) == 1:
        return digests[0], True
    if len(digests) > 1:
        raise UsageError(
            f"image {local} was pushed to several repositories ({', '.join(digests)})",
            hint="choose one with --image REPOSITORY@sha256:<hex>",
        )
    say(
        f"image {local} was never pushed, so no digest pins it: the objects name the tag "
        "(fine for a cluster that loads local images; push it and export again, or give "
        "--image REPOSITORY@sha256:<hex>, for any other)"
    )
    return local, False
