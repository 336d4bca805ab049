"""The model manifest (``manifest.json`` of an image's model directory, schema_version 3):
every engine of the model with its engine manifest, the assets, and the pipeline.

The compile of one engine writes an *engine directory* whose ``manifest.json`` is that
engine's :class:`~mmaas.core.manifest.Manifest` (schema_version 2: one engine, its files,
signature, back-end facts and build report; also what the engine cache stores and what
``mmaas serve`` serves). The package build's stamp step assembles a *model directory*
from one or more engine directories and the assets and writes this manifest over them::

    manifest.json          this file (schema_version 3)
    <engine files>         one engine: at the top, as in an engine directory ("." below)
    <engine>/<files>       several engines: one folder per engine name
    assets/<path>          the side files model.yaml's ``assets:`` lists
    image-files.json       in an image: every file it runs or serves, by content
                           (:mod:`mmaas.core.file_listing`), recorded in ``image_files``

Each engine's file paths are relative to its ``directory``; asset paths to the model
directory. A schema-2 file (an engine directory) reads as a one-engine model named by its
signature (:func:`read_model_manifest`), so every engine directory is servable as is.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from mmaas.core.errors import IntegrityError
from mmaas.core.files import atomic_write_text
from mmaas.core.hashing import bytes_digest
from mmaas.core.manifest import (
    MANIFEST_NAME,
    FileRecord,
    Manifest,
    ModelInfo,
    manifest_from_dict,
    model_info_from_dict,
    read_sealed,
    seal_digest,
    verify_engine,
    verify_file,
)
from mmaas.core.manifest import (
    SCHEMA_VERSION as ENGINE_SCHEMA_VERSION,
)

SCHEMA_VERSION = 3  # 3: several engines, assets and a pipeline (2: one engine directory)
SINGLE_ENGINE = "model"  # the engine name of a single-engine model.yaml (top-level source:)
ASSETS_DIR = "assets"


@dataclass(frozen=True)
class EngineEntry:
    """One engine of the model: its ``name`` in model.yaml, the ``directory`` of its files
    relative to the model directory (``.`` for a single engine), and its engine manifest
    (``manifest.model`` is its served signature, named as the repository serves it)."""

    name: str
    directory: str
    manifest: Manifest


@dataclass(frozen=True)
class Asset:
    """A side file of the model (model.yaml ``assets:``): its name and its record (path
    relative to the model directory, ``assets/<path in the model folder>``)."""

    name: str
    file: FileRecord


@dataclass(frozen=True)
class PipelineRecord:
    """The model a ``pipeline:`` composes from the engines: its kind (a name of
    ``mmaas.pipelines.PIPELINES``), the kind's settings (JSON), its served signature and
    the engines also served alone beside it."""

    kind: str
    settings: dict[str, Any]
    model: ModelInfo
    serve_engines: tuple[str, ...]

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> PipelineRecord:
        """From its JSON form. Raises KeyError/TypeError when malformed."""
        return cls(
            kind=raw["kind"],
            settings=raw["settings"],
            model=model_info_from_dict(raw["model"]),
            serve_engines=tuple(raw["serve_engines"]),
        )


@dataclass(frozen=True)
class ModelManifest:
    """The whole model manifest. ``engines`` keep model.yaml's order; ``build`` holds the
    stamp step's facts (mmaas version, time, provenance); ``image_files`` the record of the
    image's file listing, set by the runtime stage's seal (None outside an image:
    :mod:`mmaas.core.image_seal`); ``manifest_digest`` is the sha256 of the canonical JSON
    of every other field."""

    name: str
    version: str
    spec_digest: str
    engines: tuple[EngineEntry, ...]
    assets: tuple[Asset, ...] = ()
    pipeline: PipelineRecord | None = None
    build: dict[str, Any] = field(default_factory=dict)
    image_files: FileRecord | None = None
    schema_version: int = SCHEMA_VERSION
    manifest_digest: str = ""

    def engine(self, name: str) -> EngineEntry:
        """The engine called ``name``. Raises KeyError for another name."""
        for entry in self.engines:
            if entry.name == name:
                return entry
        raise KeyError(name)

    def served_engines(self) -> tuple[EngineEntry, ...]:
        """The engines served as models of their own (all without a pipeline)."""
        if self.pipeline is None:
            return self.engines
        return tuple(e for e in self.engines if e.name in self.pipeline.serve_engines)

    def sealed(self) -> ModelManifest:
        """This manifest with ``manifest_digest`` computed over every other field."""
        return replace(self, manifest_digest=seal_digest(asdict(self)))


def write_model_manifest(directory: Path, manifest: ModelManifest) -> ModelManifest:
    """Seal ``manifest`` and write it to ``directory/manifest.json`` atomically; return it."""
    sealed = manifest.sealed()
    text = json.dumps(asdict(sealed), indent=2, sort_keys=True) + "\n"
    atomic_write_text(directory / MANIFEST_NAME, text)
    return sealed


def read_model_manifest(directory: Path) -> ModelManifest:
    """Load and self-check ``directory/manifest.json``: a model manifest (schema 3), or an
    engine manifest (schema 2), read as a one-engine model at ``.``.

    Raises:
        IntegrityError: the file is missing, unreadable, of another schema version, or
            its ``manifest_digest`` does not match its content (it was edited).
    """
    path, raw = read_sealed(
        directory,
        {SCHEMA_VERSION: "a model directory", ENGINE_SCHEMA_VERSION: "an engine directory"},
    )
    version = raw["schema_version"]
    try:
        return _from_dict(raw) if version == SCHEMA_VERSION else _one_engine(raw)
    except (KeyError, TypeError, AttributeError) as exc:
        raise IntegrityError(f"{path}: malformed manifest ({exc!r})") from exc


def verify_model(directory: Path, manifest: ModelManifest) -> None:
    """Re-hash every engine file, engine data file and asset the manifest records (blake3,
    sha256 and size of each), and the image's file listing when it has one.

    Raises:
        IntegrityError: a file is missing or differs, naming it and both digests.
    """
    for entry in manifest.engines:
        verify_engine(directory / entry.directory, entry.manifest)
    for asset in manifest.assets:
        verify_file(directory, asset.file, f"asset {asset.name!r}")
    if manifest.image_files is not None:
        verify_file(directory, manifest.image_files, "image file listing")


def stage_warnings(manifest: ModelManifest) -> list[str]:
    """The warnings the builder stage recorded in each engine's report (``warnings``: e.g.
    an output whose real shape is not the declared one), each prefixed with its engine's
    name when the model has several."""
    several = len(manifest.engines) > 1
    return [
        f"engine {entry.name}: {text}" if several else text
        for entry in manifest.engines
        for text in entry.manifest.report.get("warnings", [])
    ]


def engine_set_digest(manifest: ModelManifest, algo: str = "blake3") -> str:
    """The identity of the model's engines, as label ``io.mmaas.engine.<algo>`` shows and
    ``MMAAS_EXPECTED_ENGINE`` pins (``algo``: ``blake3`` or ``sha256``): for one engine its
    engine file's digest (what it always was); for several, the ``algo`` digest of the
    lines ``<engine> <path> <file digest>`` of every engine file and engine data file,
    sorted, joined by newlines."""
    if len(manifest.engines) == 1:
        engine = manifest.engines[0].manifest.engine
        return str(getattr(engine, algo))
    lines = sorted(
        f"{entry.name} {record.path} {getattr(record, algo)}"
        for entry in manifest.engines
        for record in (entry.manifest.engine, *entry.manifest.engine_data)
    )
    return bytes_digest("\n".join(lines).encode(), algo)


def _from_dict(raw: dict[str, Any]) -> ModelManifest:
    pipeline = raw.get("pipeline")
    return ModelManifest(
        name=raw["name"],
        version=raw["version"],
        spec_digest=raw["spec_digest"],
        engines=tuple(
            EngineEntry(e["name"], e["directory"], manifest_from_dict(e["manifest"]))
            for e in raw["engines"]
        ),
        assets=tuple(Asset(a["name"], FileRecord(**a["file"])) for a in raw["assets"]),
        pipeline=None if pipeline is None else PipelineRecord.from_dict(pipeline),
        build=raw["build"],
        image_files=FileRecord(**raw["image_files"]) if raw.get("image_files") else None,
        schema_version=raw["schema_version"],
        manifest_digest=raw["manifest_digest"],
    )


def _one_engine(raw: dict[str, Any]) -> ModelManifest:
    engine = manifest_from_dict(raw)
    return ModelManifest(
        name=engine.model.name,
        version=engine.model.version,
        spec_digest=engine.spec_digest,
        engines=(EngineEntry(SINGLE_ENGINE, ".", engine),),
        build=engine.build,
        schema_version=engine.schema_version,
        manifest_digest=engine.manifest_digest,
    )
