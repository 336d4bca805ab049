"""``mmaas serve``'s compile: what the builder stage does, on this host, without Docker.

A single-engine model (no assets, no pipeline) compiles into ``<model folder>/.mmaas/
engine``, an engine directory that is served as is. Any other model compiles each engine
into ``.mmaas/engines/<engine>`` and is stamped, with its assets, into ``.mmaas/model`` as
the package build does. An engine directory is reused while it verifies and was built from
the same engine request and source file, so changing one engine recompiles only that one.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from mmaas.build.plan import compile_request
from mmaas.build.requests import engine_checks, engine_digest, engine_request, model_request
from mmaas.build.spec_checks import host_checks
from mmaas.core.errors import IntegrityError
from mmaas.core.files import link_or_copy
from mmaas.core.hashing import file_digests
from mmaas.core.model_dir import verify_engine_dir
from mmaas.spec.composition import asset_target
from mmaas.spec.load import EngineSource, LoadedSpec, load_spec
from mmaas.stage.build import build_model_dir
from mmaas.stage.stamp import stamp_model_dir


def compile_local(model: Path, *, rebuild: bool = False) -> tuple[LoadedSpec, Path]:
    """Compile ``model`` on this host (see the module docstring); return the loaded spec
    and the model directory to serve. ``rebuild`` recompiles every engine.

    Raises:
        SpecError, BuildError, IntegrityError: as for ``mmaas build``.
    """
    loaded = load_spec(model, checks=host_checks())
    work = loaded.model_dir / ".mmaas"
    if len(loaded.engines) == 1 and not loaded.assets and loaded.pipeline is None:
        return loaded, _engine(loaded, loaded.engines[0], work / "engine", rebuild)
    engine_dirs = {
        e.name: _engine(loaded, e, work / "engines" / e.name, rebuild) for e in loaded.engines
    }
    with tempfile.TemporaryDirectory(prefix="tree-", dir=work) as scratch:
        tree = Path(scratch)
        for name, engine_dir in engine_dirs.items():
            target = tree / loaded.engine_folder(name)
            shutil.copytree(engine_dir, target, copy_function=link_or_copy, dirs_exist_ok=True)
        for path in loaded.assets.values():
            target = tree / asset_target(loaded.model_dir, path)
            target.parent.mkdir(parents=True, exist_ok=True)
            link_or_copy(path, target)
        stamp_model_dir(tree, work / "model", model_request(loaded, {}))
    return loaded, work / "model"


def _engine(loaded: LoadedSpec, engine: EngineSource, out_dir: Path, rebuild: bool) -> Path:
    """Compile one engine into ``out_dir`` unless a matching one is there."""
    spec, source = engine.spec, engine.source_path
    digest = engine_digest(engine_request(spec, source, None))
    if not rebuild and _reusable(out_dir, digest, source):
        return out_dir
    build_model_dir(
        compile_request(spec, source, out_dir),
        digest,
        out_dir,
        checks=engine_checks(spec, source),
        samples=[loaded.model_dir / s for s in spec.checks.sample_files()],
    )
    return out_dir


def _reusable(out_dir: Path, spec_digest: str, source: Path) -> bool:
    try:
        manifest = verify_engine_dir(out_dir)
    except IntegrityError:
        return False
    return (
        manifest.spec_digest == spec_digest
        and manifest.source.sha256 == file_digests(source)["sha256"]
    )
