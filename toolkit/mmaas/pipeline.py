"""``mmaas build``: load -> plan -> render -> stage context -> docker build -> check.

After the image is built, its model directory is copied out and verified on the host
(the manifest's self-digest and the engine's hashes), and the engine's identity is added
as labels (``io.mmaas.engine.blake3`` ...), which are then read back and compared with
the manifest: an image whose labels, manifest and engine disagree is never tagged.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import mmaas
from mmaas import docker_engine
from mmaas.errors import IntegrityError
from mmaas.hashing import file_digests
from mmaas.manifest import Manifest, atomic_write_text
from mmaas.onnx_graph import external_data_files
from mmaas.plan import MODEL_DIR, BuildPlan, compile_request, make_plan
from mmaas.render import render_dockerfile
from mmaas.spec_load import LoadedSpec, load_spec
from mmaas.stage import build_model_dir, verify_model_dir

TOOLKIT_DIR = Path(mmaas.__file__).resolve().parent
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc")


@dataclass(frozen=True)
class BuildResult:
    """A built, verified and labelled image.

    Attributes:
        image: the tag (``repository:tag``).
        image_id: ``sha256:<hex>`` of the labelled image.
        manifest: the engine's manifest as verified on the host.
        labels: the engine labels added after the build.
        plan_digest: digest of the build plan.
        seconds: wall time of the whole build, in seconds.
    """

    image: str
    image_id: str
    manifest: Manifest
    labels: dict[str, str]
    plan_digest: str
    seconds: float


def plan_model(model: Path, *, ca_bundle: Path | None = None,
               buildkit: bool | None = None) -> tuple[LoadedSpec, BuildPlan]:
    """Load ``model`` (folder or model.yaml) and plan its image. ``buildkit`` None asks the
    Docker client; ``ca_bundle`` overrides ``image.ca_bundle`` and ``MMAAS_CA_BUNDLE``.

    Raises:
        SpecError: the spec is invalid. DockerError: ``buildkit`` is None and no engine.
    """
    loaded = load_spec(model)
    bundle = ca_bundle or _ca_bundle(loaded)
    if buildkit is None:
        buildkit = docker_engine.client().buildkit
    plan = make_plan(loaded.spec, loaded.source_path, toolkit_dir=TOOLKIT_DIR,
                     buildkit=buildkit, ca_bundle=bundle,
                     external_data=external_data_files(loaded.source_path))
    return loaded, plan


def stage_context(plan: BuildPlan, context: Path) -> Path:
    """Fill the empty directory ``context`` with only this model's build inputs (C14);
    return the Dockerfile's path. Large files are hard-linked when possible."""
    for item in plan.files:
        target = context / item.target
        target.parent.mkdir(parents=True, exist_ok=True)
        if item.source.is_dir():
            shutil.copytree(item.source, target, ignore=IGNORED)
        else:
            _link_or_copy(item.source, target)
    for name, text in plan.generated.items():
        atomic_write_text(context / name, text)
    dockerfile = context / "Dockerfile"
    atomic_write_text(dockerfile, render_dockerfile(plan))
    return dockerfile


def build_image(model: Path, *, ca_bundle: Path | None = None,
                revision: str | None = None) -> BuildResult:
    """Build, verify and label the image of ``model``.

    Raises:
        SpecError, DockerError, IntegrityError: as their names say.
    """
    started = time.perf_counter()
    _, plan = plan_model(model, ca_bundle=ca_bundle)
    with tempfile.TemporaryDirectory(prefix="mmaas-context-") as scratch:
        dockerfile = stage_context(plan, Path(scratch))
        built = docker_engine.build(Path(scratch), dockerfile, plan.image)
    manifest = _verified_manifest(built)
    labels = engine_labels(manifest, plan.digest, revision)
    image_id = docker_engine.add_labels(plan.image, labels)
    check_labels(plan.image, manifest)
    return BuildResult(plan.image, image_id, manifest, labels, plan.digest,
                       round(time.perf_counter() - started, 3))


def compile_local(model: Path, *, rebuild: bool = False) -> Path:
    """Compile ``model`` on this host into ``<model folder>/.mmaas/engine`` (what the
    builder stage does, without Docker) and return that model directory. An existing
    directory is reused when it verifies and was built from the same spec digest and
    source sha256, unless ``rebuild``.

    Raises:
        SpecError, BuildError: as for ``mmaas build``.
    """
    loaded = load_spec(model)
    out_dir = loaded.model_dir / ".mmaas" / "engine"
    digest = loaded.spec.digest()
    if not rebuild and _reusable(out_dir, digest, loaded.source_path):
        return out_dir
    request = compile_request(loaded.spec, loaded.source_path, out_dir)
    build_model_dir(request, digest, out_dir)
    return out_dir


def _reusable(out_dir: Path, spec_digest: str, source: Path) -> bool:
    try:
        manifest = verify_model_dir(out_dir)
    except IntegrityError:
        return False
    return (manifest.spec_digest == spec_digest
            and manifest.source.sha256 == file_digests(source)["sha256"])


def engine_labels(manifest: Manifest, plan_digest: str, revision: str | None) -> dict[str, str]:
    """Labels that identify the engine inside the image (known only after the build)."""
    labels = {"io.mmaas.engine.blake3": manifest.engine.blake3,
              "io.mmaas.engine.sha256": manifest.engine.sha256,
              "io.mmaas.manifest.digest": manifest.manifest_digest,
              "io.mmaas.plan.digest": plan_digest}
    if revision:
        labels["org.opencontainers.image.revision"] = revision
    return labels


def verify_image(image: str) -> Manifest:
    """Copy the model directory out of ``image``, verify it on this host and compare the
    image's labels with the manifest.

    Raises:
        IntegrityError: engine, manifest and labels disagree. DockerError: no such image.
    """
    manifest = _verified_manifest(image)
    check_labels(image, manifest)
    return manifest


def check_labels(image: str, manifest: Manifest) -> None:
    """Raise IntegrityError when ``image``'s engine labels differ from ``manifest``."""
    labels = docker_engine.image_labels(image)
    expected = {"io.mmaas.engine.blake3": manifest.engine.blake3,
                "io.mmaas.engine.sha256": manifest.engine.sha256,
                "io.mmaas.manifest.digest": manifest.manifest_digest}
    wrong = {k: labels.get(k) for k, v in expected.items() if labels.get(k) != v}
    if wrong:
        details = ", ".join(f"{k}={v!r} (manifest: {expected[k]})" for k, v in wrong.items())
        raise IntegrityError(f"{image}: labels disagree with the engine manifest: {details}")


def _verified_manifest(image: str) -> Manifest:
    with tempfile.TemporaryDirectory(prefix="mmaas-verify-") as scratch:
        return verify_model_dir(docker_engine.copy_from_image(image, MODEL_DIR,
                                                              Path(scratch) / "model"))


def _ca_bundle(loaded: LoadedSpec) -> Path | None:
    configured = loaded.spec.image.ca_bundle or os.environ.get("MMAAS_CA_BUNDLE")
    return None if not configured else (loaded.model_dir / configured).resolve()


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
