"""Stamping: an engine directory -- just compiled, or a verified engine-cache entry --
becomes one model's directory: the engine, its data files (e.g. ONNX Runtime's
``model.ort.onnx.data``) and the report unchanged (hard-linked when possible), the
manifest re-sealed with that model's name, version and spec digest. So one engine serves
any number of builds that differ only outside the engine (name, version, runtime settings,
labels). Runs in the builder stage (``python -m mmaas.stage stamp``).
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

from mmaas.core.errors import IntegrityError
from mmaas.core.files import assembled, link_or_copy
from mmaas.core.manifest import MANIFEST_NAME, Manifest, ModelInfo, verify_engine, write_manifest
from mmaas.core.model_dir import verify_model_dir


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
