"""A rebuild with nothing changed does no Docker build.

The *build digest* is a sha256 over everything the package build's image is made from:
the package plan's digest (template name, values, generated files, labels), the template's
text (a new template changes it), the bytes of every file and wheel it stages except
the engine directories (the assets staged beside them are hashed), the engine-cache key of
each engine (which stands for its engine directory: it covers everything the compile
reads), the content of every image the
Dockerfile starts from (:func:`~mmaas.build.cache.key.image_content`) and the
``--revision``. ``mmaas build`` labels the image with it (``io.mmaas.build.digest``) and,
after the image is verified and labelled, keeps a record (``<engine cache>/builds/<digest
hex>/``: the verified ``manifest.json`` and ``image.json`` with the image id, tag and
labels), written whole or not at all.

A later build with the same digest checks the local image of that tag: its build-digest
label equals the digest, its image id equals the recorded one (Docker's image id is the
digest of its configuration, layers and labels included, so it is the image that was
verified), and its identity labels equal the recorded manifest's. Then no Docker build
runs and the recorded result is returned; otherwise the build goes on and says why.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from filelock import FileLock

from mmaas.backends.targets import ENGINE_CONTEXT, ContextFile
from mmaas.build import docker as docker_engine
from mmaas.build.cache.key import content_digest, image_content
from mmaas.build.cache.local import LOCK_TIMEOUT_S, EngineCache
from mmaas.build.plan import BuildPlan, ContextWheel
from mmaas.build.verify import identity_labels
from mmaas.core.errors import DockerError, IntegrityError
from mmaas.core.files import assembled, atomic_write_text
from mmaas.core.hashing import bytes_digest
from mmaas.core.manifest import MANIFEST_NAME
from mmaas.core.model_manifest import ASSETS_DIR, ModelManifest, read_model_manifest
from mmaas.core.templates import template_file

BUILD_DIGEST_LABEL = "io.mmaas.build.digest"
RECORD_FILE = "image.json"
RECORDS_DIR = "builds"  # beside the entries <key hex>/, which are 64 hex digits


@dataclass(frozen=True)
class CurrentImage:
    """An up-to-date image: its tag, id, labels, plan digest and verified model manifest."""

    image: str
    image_id: str
    labels: dict[str, str]
    plan_digest: str
    manifest: ModelManifest


def records_root(engine_cache_root: Path | None) -> Path:
    """Where build records live: ``builds/`` inside the engine cache (``--engine-cache-dir``,
    else ``$MMAAS_CACHE_DIR/engines``, else ``~/.cache/mmaas/engines``), so a fresh engine
    cache also means no build is taken as current."""
    return EngineCache(engine_cache_root).root / RECORDS_DIR


def build_digest(
    plan: BuildPlan, engine_keys: Sequence[str | None], revision: str | None
) -> str | None:
    """``sha256:<hex>`` of the package build of ``plan`` (see the module docstring), or
    None when an engine key or a base image is unknown (nothing to compare then).

    Raises:
        OSError: a staged file cannot be read.
    """
    if not engine_keys or any(key is None for key in engine_keys):
        return None
    images: dict[str, str] = {}
    for name in sorted({v for k, v in plan.values.items() if k.endswith("_image")}):
        try:
            images[name] = image_content(docker_engine.inspect_image(str(name)))
        except DockerError:  # not in the local engine: the build pulls or makes it
            return None
    staged: list[ContextFile | ContextWheel] = [f for f in plan.files if not _is_engine(f)]
    body = {
        "plan": plan.digest,
        "template": bytes_digest(template_file(plan.template).encode()),
        "files": {item.target: content_digest(item) for item in [*staged, *plan.wheels]},
        "engines": list(engine_keys),
        "images": images,
        "revision": revision,
    }
    return bytes_digest(json.dumps(body, sort_keys=True).encode())


def _is_engine(item: ContextFile) -> bool:
    """True for an engine directory of the package context (``engine``, ``engine/<name>``),
    which its engine-cache key stands for; the assets staged beside them are hashed."""
    parts = item.target.split("/")
    return parts[0] == ENGINE_CONTEXT and parts[1:2] != [ASSETS_DIR]


def current_image(image: str, digest: str, records: Path) -> tuple[CurrentImage | None, str]:
    """The recorded build ``digest`` when the local ``image`` is still exactly it, and a
    note saying what was found: that no build is needed, or why one is (``""`` when no
    build of this digest was recorded: the usual first build).

    Raises:
        DockerError: no Docker engine.
    """
    record = records / digest.removeprefix("sha256:")
    try:
        with _locked(records, digest):
            saved: dict[str, Any] = json.loads((record / RECORD_FILE).read_text())
            manifest = read_model_manifest(record)
    except FileNotFoundError:
        return None, ""
    except (OSError, ValueError, KeyError, IntegrityError) as exc:
        return None, f"the record of build {digest[:19]} is unreadable ({exc}): building"
    try:
        inspected = docker_engine.inspect_image(image)
    except DockerError:
        return None, f"{image} is not in the local Docker engine: building"
    labels = dict((inspected.get("Config") or {}).get("Labels") or {})
    if labels.get(BUILD_DIGEST_LABEL) != digest:
        return None, f"{image} was built from other inputs: building"
    if inspected.get("Id") != saved.get("image_id"):
        return None, f"{image} is not the image this digest's build verified: building"
    if any(labels.get(k) != v for k, v in identity_labels(manifest).items()):
        return None, f"{image}'s engine labels differ from the recorded manifest: building"
    found = CurrentImage(image, saved["image_id"], saved["labels"], saved["plan_digest"], manifest)
    return found, f"{image} is up to date (build digest {digest[:19]}): no Docker build"


def record_build(records: Path, digest: str, built: CurrentImage, model_dir: Path) -> None:
    """Keep the record of a verified, labelled build (``model_dir``: its verified copy)."""
    record = {
        "image": built.image,
        "image_id": built.image_id,
        "labels": built.labels,
        "plan_digest": built.plan_digest,
        "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    with _locked(records, digest), assembled(records / digest.removeprefix("sha256:")) as work:
        shutil.copyfile(model_dir / MANIFEST_NAME, work / MANIFEST_NAME)
        atomic_write_text(work / RECORD_FILE, json.dumps(record, indent=2) + "\n")


def _locked(records: Path, digest: str) -> FileLock:
    """The lock of one record (readers and the writer): a record is replaced whole."""
    records.mkdir(parents=True, exist_ok=True)
    return FileLock(records / f".{digest.removeprefix('sha256:')}.lock", timeout=LOCK_TIMEOUT_S)


def labelled(labels: Mapping[str, str], digest: str | None) -> dict[str, str]:
    """``labels`` with the build-digest label when the digest is known."""
    return {**labels, BUILD_DIGEST_LABEL: digest} if digest else dict(labels)
