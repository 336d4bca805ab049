"""Engine and model directories, verified against their manifests (the build, the engine
cache, ``mmaas verify``, the runtime stage).

An *engine directory* is one compiled engine (its files, ``manifest.json`` schema 2,
``report.json``): what the compile writes and the engine cache stores. A *model directory*
is what an image serves: one or more engines and the assets under a model manifest
(schema 3, :mod:`mmaas.core.model_manifest`); an engine directory is also a one-engine model
directory.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mmaas.core.errors import IntegrityError
from mmaas.core.manifest import Manifest, read_manifest, verify_engine
from mmaas.core.model_manifest import ModelManifest, read_model_manifest, verify_model

REPORT_NAME = "report.json"


def verify_engine_dir(directory: Path) -> Manifest:
    """Read and self-check an engine directory's manifest, then re-hash the engine and
    every engine data file it records (:func:`mmaas.core.manifest.verify_engine`).

    Raises:
        IntegrityError: the manifest was altered or is not an engine manifest, or an
            engine file is missing or differs.
    """
    manifest = read_manifest(directory)
    verify_engine(directory, manifest)
    return manifest


def verify_model_dir(directory: Path) -> ModelManifest:
    """Read and self-check a model directory's manifest (or an engine directory's), then
    re-hash every engine, engine data file and asset it records.

    Raises:
        IntegrityError: the manifest was altered, or a file is missing or differs.
    """
    manifest = read_model_manifest(directory)
    verify_model(directory, manifest)
    return manifest


def describe(manifest: ModelManifest) -> str:
    """``engine det/model.ort.onnx blake3:..., asset tokenizer assets/t.json blake3:...``:
    what a verification checked, for its one-line report."""
    files = [
        f"{entry.name} {Path(entry.directory, record.path).as_posix()} {record.blake3}"
        for entry in manifest.engines
        for record in (entry.manifest.engine, *entry.manifest.engine_data)
    ]
    files += [f"asset {a.name} {a.file.path} {a.file.blake3}" for a in manifest.assets]
    return ", ".join(files)


def main(argv: list[str]) -> int:
    """``python -m mmaas.core.model_dir MODEL_DIR``: verify a model directory (the runtime
    stage's build-time check, which needs nothing but the foundation); 0 and one line
    naming every file checked, or 1 and one line naming the mismatch, 2 for a usage error."""
    if len(argv) != 1:
        print("usage: python -m mmaas.core.model_dir MODEL_DIR", file=sys.stderr)
        return 2
    try:
        manifest = verify_model_dir(Path(argv[0]))
    except IntegrityError as exc:
        print(f"mmaas: error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"model verified: {manifest.name} {manifest.version}: {describe(manifest)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
