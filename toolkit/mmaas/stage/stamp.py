"""Stamping: the staged engine tree -- one engine directory per engine (just compiled, or
verified engine-cache entries) and the assets -- becomes one model's directory: every
file unchanged (hard-linked when possible), each engine manifest re-sealed with the name
it is served under, this build's version and spec digest, and the model manifest
(:mod:`mmaas.core.model_manifest`) written over them. So one engine serves any number of
builds that differ only outside the engine (name, version, runtime settings, labels,
sibling engines). Runs in the builder stage (``python -m mmaas.stage stamp``).

The staged tree is laid out as the model directory will be: a single engine's directory
at the top (``.``), several engines in one folder each, assets under ``assets/``.
"""

from __future__ import annotations

import shutil
from dataclasses import asdict, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import mmaas
from mmaas.core.errors import BuildError, IntegrityError
from mmaas.core.files import assembled, link_or_copy
from mmaas.core.manifest import MANIFEST_NAME, FileRecord, Manifest
from mmaas.core.model_dir import verify_engine_dir
from mmaas.core.model_manifest import (
    Asset,
    EngineEntry,
    ModelManifest,
    verify_model,
    write_model_manifest,
)
from mmaas.core.model_request import EngineStamp, ModelRequest


def read_model_request(path: Path) -> ModelRequest:
    """Parse the stamp request file the build plan wrote.

    Raises:
        BuildError: the file is missing or malformed.
    """
    try:
        return ModelRequest.from_json(path.read_text())
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BuildError(f"{path}: unreadable stamp request ({exc!r})") from exc


def stamp_model_dir(tree: Path, out_dir: Path, request: ModelRequest) -> ModelManifest:
    """Make ``out_dir`` the model directory ``request`` describes from the staged ``tree``:
    its files linked or copied unchanged (the engine directories' own manifests left out),
    verified, and the model manifest written.

    Raises:
        IntegrityError: an engine directory fails verification, was built for another
            engine key, or serves another signature than its stamp (beyond name and
            version); an asset is missing or differs from its sha256 pin.
    """
    adopted = [(stamp, _adopt(tree / stamp.directory, stamp)) for stamp in request.engines]
    engine_manifests = {str((tree / s.directory / MANIFEST_NAME).resolve()) for s, _ in adopted}
    with assembled(out_dir) as work:
        shutil.copytree(
            tree,
            work,
            ignore=lambda folder, names: [
                name for name in names if str((Path(folder) / name).resolve()) in engine_manifests
            ],
            copy_function=link_or_copy,
            dirs_exist_ok=True,
        )
        manifest = ModelManifest(
            name=request.name,
            version=request.version,
            spec_digest=request.spec_digest,
            engines=tuple(
                EngineEntry(
                    stamp.name,
                    stamp.directory,
                    replace(built, model=stamp.model, spec_digest=request.spec_digest).sealed(),
                )
                for stamp, built in adopted
            ),
            assets=tuple(_asset(work, a.name, a.path, a.sha256) for a in request.assets),
            pipeline=request.pipeline,
            build={
                "mmaas_version": mmaas.__version__,
                "stamped_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "provenance": _provenance(request, adopted),
            },
        )
        verify_model(work, manifest)
        return write_model_manifest(work, manifest)


def _provenance(
    request: ModelRequest, adopted: list[tuple[EngineStamp, Manifest]]
) -> dict[str, Any]:
    """The provenance record (:mod:`mmaas.build.provenance`): the host's part from the
    request, and per engine the compile command, the ONNX source's hashes and the key."""
    engines = {
        stamp.name: {
            "command": built.build.get("command"),
            "source": asdict(built.source),
            "engine_key": built.build.get("engine_key"),
        }
        for stamp, built in adopted
    }
    return {**request.provenance, "engines": engines}


def _adopt(engine_dir: Path, stamp: EngineStamp) -> Manifest:
    built = verify_engine_dir(engine_dir)
    if stamp.engine_key and built.build.get("engine_key") != stamp.engine_key:
        raise IntegrityError(
            f"{engine_dir}: engine {stamp.name!r} built for key "
            f"{built.build.get('engine_key')}, this build needs {stamp.engine_key}"
        )
    model = stamp.model
    if replace(built.model, name=model.name, version=model.version) != model:
        raise IntegrityError(
            f"{engine_dir}: engine {stamp.name!r} serves another signature than "
            f"{model.name} {model.version} (inputs, outputs or profile)"
        )
    return built


def _asset(directory: Path, name: str, path: str, sha256: str | None) -> Asset:
    if not (directory / path).is_file():
        raise IntegrityError(f"{directory / path}: asset {name!r} is missing from the build")
    record = FileRecord.of(directory, path)
    if sha256 is not None and record.sha256 != sha256:
        raise IntegrityError(
            f"{directory / path}: asset {name!r} is {record.sha256}, but model.yaml pins "
            f"{sha256}; refusing to package it"
        )
    return Asset(name, record)
