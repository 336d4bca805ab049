"""Model directories (engine and its data files + ``manifest.json`` + ``report.json``): verify
one, assemble one atomically, and stamp an engine directory for a model.

Stamping turns an engine directory -- just compiled, or a verified engine-cache entry --
into one model's directory: the engine, its data files (e.g. ONNX Runtime's
``model.ort.onnx.data``) and the report unchanged (hard-linked when possible),
the manifest re-sealed with that model's name, version and spec digest. So one engine
serves any number of builds that differ only outside the engine (name, version, runtime
settings, labels). Runs in the builder stage (``python -m mmaas.stage stamp``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from mmaas.core.errors import IntegrityError
from mmaas.core.manifest import (
    MANIFEST_NAME,
    Manifest,
    ModelInfo,
    read_manifest,
    verify_engine,
    write_manifest,
)

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


def stamp_model_dir(
    engine_dir: Path, out_dir: Path, model: ModelInfo, spec_digest: str, engine_key: str | None
) -> Manifest:
    """Make ``out_dir`` the model directory of ``model`` from the verified ``engine_dir``:
    its files linked or copied unchanged, the manifest re-sealed with ``model`` (name,
    version) and ``spec_digest``.

    Raises:
        IntegrityError: ``engine_dir`` fails verification, was built for another engine key,
            or serves another signature than ``model`` (beyond name and version).
    """
    built = verify_model_dir(engine_dir)
    if engine_key and built.build.get("engine_key") != engine_key:
        raise IntegrityError(
            f"{engine_dir}: engine built for key "
            f"{built.build.get('engine_key')}, this build needs {engine_key}"
        )
    if replace(built.model, name=model.name, version=model.version) != model:
        raise IntegrityError(
            f"{engine_dir}: engine serves another signature than "
            f"{model.name} {model.version} (inputs, outputs or profile)"
        )
    with assembled(out_dir) as work:
        shutil.copytree(
            engine_dir,
            work,
            ignore=shutil.ignore_patterns(MANIFEST_NAME),
            copy_function=link_or_copy,
            dirs_exist_ok=True,
        )
        verify_engine(work, built)
        return write_manifest(work, replace(built, model=model, spec_digest=spec_digest))


@contextmanager
def assembled(out_dir: Path) -> Iterator[Path]:
    """A sibling temp directory (mode 0755: readable by the runtime's non-root user) that
    replaces ``out_dir`` when the block succeeds and is removed when it fails, so a model
    directory appears whole or not at all."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}."))
    work.chmod(0o755)
    try:
        yield work
        if out_dir.exists():
            shutil.rmtree(out_dir)
        work.rename(out_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def link_or_copy(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
    """Hard-link ``source`` to ``target`` (large engines cost no copy), or copy it (with
    its times and mode) across file systems; usable as ``shutil.copytree``'s
    ``copy_function``."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
