"""Shared by the export and signing tests: a model folder copied from a real one, an
ExportSource made from its spec and a manifest recorded for it (no Docker: the image's
verification is the docker tests' part), and Ed25519 keys made with openssl."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from mmaas.build.requests import model_info
from mmaas.build.spec_checks import host_checks
from mmaas.core.manifest import FileRecord, Manifest
from mmaas.core.model_manifest import SINGLE_ENGINE, EngineEntry, ModelManifest
from mmaas.export.source import ExportSource
from mmaas.spec.load import load_spec

ENGINE_BYTES = 96 * 2**20  # a 96 MiB engine: the derived memory request follows it
PINNED = "127.0.0.1:5000/mmaas/ppocr-det@sha256:" + "ab" * 32


def model_copy(tmp_path: Path, onnx: Path, extra: dict) -> Path:
    """A copy of models/ppocr-det (the real ONNX hard-linked) with ``extra`` top-level
    sections laid over its model.yaml."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / onnx.name).hardlink_to(onnx)
    spec = yaml.safe_load((onnx.parent / "model.yaml").read_text())
    (folder / "model.yaml").write_text(yaml.safe_dump({**spec, **extra}, sort_keys=False))
    return folder


def source_of(folder: Path, reference: str = PINNED, report: dict | None = None) -> ExportSource:
    """The ExportSource of the model in ``folder`` as if its image were built and pushed
    as ``reference`` (``report``: the engine's build report, none by default)."""
    loaded = load_spec(folder, checks=host_checks())
    record = FileRecord("model.ort.onnx", "blake3:" + "1" * 64, "sha256:" + "2" * 64, ENGINE_BYTES)
    manifest = Manifest(
        model=model_info(loaded.spec),
        engine=record,
        source=FileRecord.of(loaded.source_path.parent, loaded.source_path.name),
        spec_digest=loaded.spec.digest(),
        backend={"name": loaded.spec.backend, "version": "1.32.0"},
        build={},
        report=report or {},
    ).sealed()
    model = ModelManifest(
        name=loaded.spec.name,
        version=loaded.spec.version,
        spec_digest=manifest.spec_digest,
        engines=(EngineEntry(SINGLE_ENGINE, ".", manifest),),
    ).sealed()
    pinned = "@sha256:" in reference
    return ExportSource(
        loaded.spec, folder, reference, reference, pinned, manifest, {}, model, loaded.source_path
    )


def openssl_key(folder: Path, name: str) -> tuple[Path, Path]:
    """``name.pem`` / ``name.pub`` made with openssl (the README's commands)."""
    private, public = folder / f"{name}.pem", folder / f"{name}.pub"
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", private], check=True)
    subprocess.run(["openssl", "pkey", "-in", private, "-pubout", "-out", public], check=True)
    return private, public
