"""``mmaas serve``'s compile: what the builder stage does, on this host, without Docker."""

from __future__ import annotations

from pathlib import Path

from mmaas.build.plan import compile_request
from mmaas.build.requests import checks
from mmaas.core.errors import IntegrityError
from mmaas.core.hashing import file_digests
from mmaas.core.model_dir import verify_model_dir
from mmaas.spec.load import LoadedSpec, load_spec
from mmaas.stage.build import build_model_dir


def compile_local(model: Path, *, rebuild: bool = False) -> tuple[LoadedSpec, Path]:
    """Compile ``model`` on this host into ``<model folder>/.mmaas/engine`` (what the
    builder stage does, without Docker); return the loaded spec and that model directory.
    An existing
    directory is reused when it verifies and was built from the same spec digest and
    source sha256, unless ``rebuild``.

    Raises:
        SpecError, BuildError: as for ``mmaas build``.
    """
    loaded = load_spec(model)
    out_dir = loaded.model_dir / ".mmaas" / "engine"
    digest = loaded.spec.digest()
    if not rebuild and _reusable(out_dir, digest, loaded.source_path):
        return loaded, out_dir
    request = compile_request(loaded.spec, loaded.source_path, out_dir)
    accuracy = loaded.spec.checks.accuracy
    build_model_dir(
        request,
        digest,
        out_dir,
        checks=checks(loaded.spec.checks),
        samples=[loaded.model_dir / s for s in accuracy.samples] if accuracy else [],
    )
    return loaded, out_dir


def _reusable(out_dir: Path, spec_digest: str, source: Path) -> bool:
    try:
        manifest = verify_model_dir(out_dir)
    except IntegrityError:
        return False
    return (
        manifest.spec_digest == spec_digest
        and manifest.source.sha256 == file_digests(source)["sha256"]
    )
