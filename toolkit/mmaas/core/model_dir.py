"""Model directories (engine and its data files + ``manifest.json`` + ``report.json``):
verify one against its manifest (the build, the engine cache, ``mmaas verify``)."""

from __future__ import annotations

import sys
from pathlib import Path

from mmaas.core.errors import IntegrityError
from mmaas.core.manifest import Manifest, read_manifest, verify_engine

REPORT_NAME = "report.json"


def verify_model_dir(directory: Path) -> Manifest:
    """Read and self-check the manifest, then re-hash the engine and every engine data
    file it records against it (:func:`mmaas.core.manifest.verify_engine`).

    Raises:
        IntegrityError: the manifest was altered, or an engine file is missing or differs.
    """
    manifest = read_manifest(directory)
    verify_engine(directory, manifest)
    return manifest


def main(argv: list[str]) -> int:
    """``python -m mmaas.core.model_dir MODEL_DIR``: verify a model directory (the runtime
    stage's build-time check, which needs nothing but the foundation); 0 and one line
    naming the engine, or 1 and one line naming the mismatch, 2 for a usage error."""
    if len(argv) != 1:
        print("usage: python -m mmaas.core.model_dir MODEL_DIR", file=sys.stderr)
        return 2
    try:
        manifest = verify_model_dir(Path(argv[0]))
    except IntegrityError as exc:
        print(f"mmaas: error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(
        f"engine verified: {manifest.engine.path} {manifest.engine.blake3}"
        + "".join(f", {data.path} {data.blake3}" for data in manifest.engine_data)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
