"""``mmaas build``: load -> engine-cache key -> cached engine, or the compile build (then
keep the engine) -> the package build -> check.

"Compile, then package", as the GPU route does: the compile build ends in the builder stage
whose engine directory is copied out, verified and stored in the engine cache (and pushed);
the package build stages that directory (or a cache hit: :mod:`mmaas.build.cache.reuse`) instead
of the ONNX file and only stamps it, so it is the same build either way. After the image is
built, its model directory is copied out and verified on the host (the manifest's
self-digest and the engine's hashes), and the engine's identity is added as labels
(``io.mmaas.engine.blake3`` ...), which are then read back and compared with the manifest:
an image whose labels, manifest and engine disagree is never tagged.

TensorRT takes the GPU route (:mod:`mmaas.backends.tensorrt.gpu_route`): a missing GPU is reported
before any Docker work (C11); the compile build is ``--target builder`` and the compile
runs in ``docker run --gpus all`` of it with the ``mmaas cache`` timing-cache directory
mounted; the package build is the same as ONNX Runtime's; the image gets the engine's
TensorRT, CUDA, minimum-driver and GPU labels (C12), and with ``build.tensorrt.gpu_targets``
the ``repo:tag-smNN`` tag of the target it was built on.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import mmaas
from mmaas.backends.tensorrt.gpu_route import (
    BUILDER_TARGET,
    compile_on_gpu,
    require_gpu,
    target_tag,
    tensorrt_labels,
)
from mmaas.build import docker as docker_engine
from mmaas.build.cache.key import builder_image, key_for
from mmaas.build.cache.registry import remove_image
from mmaas.build.cache.reuse import CacheOptions, Say, keep_engine, note, reuse_engine
from mmaas.build.plan import (
    ENGINE_DIR,
    MODEL_DIR,
    BuildPlan,
    compile_request,
    engine_inputs,
    make_plan,
)
from mmaas.build.render import render_dockerfile
from mmaas.core.errors import IntegrityError
from mmaas.core.hashing import file_digests
from mmaas.core.manifest import Manifest, atomic_write_text
from mmaas.core.model_dir import link_or_copy, verify_model_dir
from mmaas.spec.load import LoadedSpec, load_spec
from mmaas.spec.onnx_graph import external_data_files
from mmaas.stage.build import build_model_dir

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
        engine_key: the engine-cache key (``sha256:<hex>``), or None when unknown.
        engine_cache: ``hit`` (local cache), ``hit-registry`` (pulled), ``miss``
            (compiled) or ``off``.
    """

    image: str
    image_id: str
    manifest: Manifest
    labels: dict[str, str]
    plan_digest: str
    seconds: float
    engine_key: str | None = None
    engine_cache: str = "off"


def plan_model(
    model: Path,
    *,
    ca_bundle: Path | None = None,
    buildkit: bool | None = None,
    engine_dir: Path | None = None,
) -> tuple[LoadedSpec, BuildPlan]:
    """Load ``model`` (folder or model.yaml) and plan one of its builds: the compile build
    (``engine_dir`` None) or the package build around ``engine_dir`` (rendering needs only
    its path: ``Path("engine")`` shows the Dockerfile that makes the image). ``buildkit``
    None asks the Docker client; ``ca_bundle`` overrides ``image.ca_bundle`` and
    ``MMAAS_CA_BUNDLE``.

    Raises:
        SpecError: the spec is invalid. DockerError: ``buildkit`` is None and no engine.
    """
    loaded = load_spec(model)
    return loaded, _plan(loaded, ca_bundle, buildkit, engine_dir=engine_dir)


def stage_context(plan: BuildPlan, context: Path) -> Path:
    """Fill the empty directory ``context`` with only this model's build inputs (C14);
    return the Dockerfile's path. Files are hard-linked when possible."""
    for item in plan.files:
        target = context / item.target
        target.parent.mkdir(parents=True, exist_ok=True)
        if item.source.is_dir():
            shutil.copytree(item.source, target, ignore=IGNORED, copy_function=link_or_copy)
        else:
            link_or_copy(item.source, target)
    for name, text in plan.generated.items():
        atomic_write_text(context / name, text)
    dockerfile = context / "Dockerfile"
    atomic_write_text(dockerfile, render_dockerfile(plan))
    return dockerfile


def build_image(
    model: Path,
    *,
    ca_bundle: Path | None = None,
    revision: str | None = None,
    cache: CacheOptions | None = None,
    say: Say = note,
) -> BuildResult:
    """Build, verify and label the image of ``model``: take the engine from the engine cache
    (local, then registry) or compile it in the compile build (and keep it), then package
    it in the package build. ``say`` reports hits, misses and dropped entries (default:
    one ``mmaas:`` line on stderr each).

    Raises:
        SpecError, DockerError, IntegrityError, BuildError: as their names say.
    """
    started = time.perf_counter()
    cache = cache or CacheOptions()
    loaded = load_spec(model)
    gpu_tag = None
    if loaded.spec.backend == "tensorrt":  # C11: a GPU (of a listed target) before any Docker work
        image = f"{loaded.spec.image_repository}:{loaded.spec.image_tag}"
        gpu_tag = target_tag(image, require_gpu(), loaded.spec.build.tensorrt.gpu_targets)
    key = _engine_key(loaded, cache, say)
    with tempfile.TemporaryDirectory(prefix="mmaas-build-") as scratch:
        work = Path(scratch)
        reuse = reuse_engine(loaded.spec.name, key, cache, work / "cached", say)
        engine_dir = reuse.path or compile_engine(loaded, key, work, ca_bundle)
        if key is not None and not reuse.hit:
            keep_engine(loaded.spec.name, key, engine_dir, cache, say)
        plan = _plan(loaded, ca_bundle, None, engine_key=key, engine_dir=engine_dir)
        built = _build(plan, work / "package", plan.image)
        manifest = verify_model_dir(docker_engine.copy_from_image(built, MODEL_DIR, work / "model"))
    labels = engine_labels(manifest, plan.digest, revision)
    if loaded.spec.backend == "tensorrt":
        labels.update(tensorrt_labels(manifest))
    image_id = docker_engine.add_labels(plan.image, labels)
    check_labels(plan.image, manifest)
    if gpu_tag:
        docker_engine.run(["tag", plan.image, gpu_tag], check=True)
        say(f"tagged {gpu_tag} (this build's GPU target)")
    return BuildResult(
        plan.image,
        image_id,
        manifest,
        labels,
        plan.digest,
        round(time.perf_counter() - started, 3),
        key,
        reuse.status,
    )


def compile_engine(
    loaded: LoadedSpec, key: str | None, work: Path, ca_bundle: Path | None = None
) -> Path:
    """Run the compile build of ``loaded`` and return its verified engine directory,
    copied out to ``work/engine`` (the builder image's tag is removed afterwards). For
    TensorRT the compile build is ``--target builder`` and the compile runs in a
    ``docker run --gpus all`` of it (:func:`mmaas.backends.tensorrt.gpu_route.compile_on_gpu`), which
    writes ``work/out/engine``.

    Raises:
        DockerError: the build failed (a failed gate or profile check names itself in the
            build output). BuildError: the GPU compile container failed. IntegrityError:
            the engine directory does not verify.
    """
    plan = _plan(loaded, ca_bundle, None, engine_key=key)
    tag = f"{loaded.spec.image_repository}:engine-{secrets.token_hex(6)}"
    if loaded.spec.backend == "tensorrt":
        engine_dir = compile_on_gpu(
            lambda: _build(plan, work / "compile", tag, BUILDER_TARGET),
            docker_engine.client().argv(),
            tag,
            work / "out",
        )
        verify_model_dir(engine_dir)
        return engine_dir
    image = _build(plan, work / "compile", tag)
    try:
        engine_dir = docker_engine.copy_from_image(tag, ENGINE_DIR, work / "engine")
    finally:
        remove_image(image)
    verify_model_dir(engine_dir)
    return engine_dir


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
        checks=loaded.spec.checks.model_dump(mode="json"),
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


def identity_labels(manifest: Manifest) -> dict[str, str]:
    """The labels that must equal the manifest: the engine's blake3 and sha256, the
    blake3 of each engine data file (comma-separated, in manifest order; absent when the
    engine is one file) and the manifest's own digest."""
    labels = {
        "io.mmaas.engine.blake3": manifest.engine.blake3,
        "io.mmaas.engine.sha256": manifest.engine.sha256,
        "io.mmaas.manifest.digest": manifest.manifest_digest,
    }
    if manifest.engine_data:
        labels["io.mmaas.engine-data.blake3"] = ",".join(f.blake3 for f in manifest.engine_data)
    return labels


def engine_labels(manifest: Manifest, plan_digest: str, revision: str | None) -> dict[str, str]:
    """Labels that identify the engine inside the image (known only after the build)."""
    labels = {**identity_labels(manifest), "io.mmaas.plan.digest": plan_digest}
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
    expected = identity_labels(manifest)
    wrong = {k: labels.get(k) for k, v in expected.items() if labels.get(k) != v}
    if wrong:
        details = ", ".join(f"{k}={v!r} (manifest: {expected[k]})" for k, v in wrong.items())
        raise IntegrityError(f"{image}: labels disagree with the engine manifest: {details}")


def _verified_manifest(image: str) -> Manifest:
    with tempfile.TemporaryDirectory(prefix="mmaas-verify-") as scratch:
        return verify_model_dir(
            docker_engine.copy_from_image(image, MODEL_DIR, Path(scratch) / "model")
        )


def _ca_bundle(loaded: LoadedSpec) -> Path | None:
    configured = loaded.spec.image.ca_bundle or os.environ.get("MMAAS_CA_BUNDLE")
    return None if not configured else (loaded.model_dir / configured).resolve()


def _build(plan: BuildPlan, context: Path, tag: str, target: str | None = None) -> str:
    context.mkdir()
    return docker_engine.build(context, stage_context(plan, context), tag, target=target)


def _plan(
    loaded: LoadedSpec,
    ca_bundle: Path | None,
    buildkit: bool | None,
    *,
    engine_key: str | None = None,
    engine_dir: Path | None = None,
) -> BuildPlan:
    if buildkit is None:
        buildkit = docker_engine.client().buildkit
    return make_plan(
        loaded.spec,
        loaded.source_path,
        toolkit_dir=TOOLKIT_DIR,
        buildkit=buildkit,
        ca_bundle=ca_bundle or _ca_bundle(loaded),
        model_dir=loaded.model_dir,
        external_data=external_data_files(loaded.source_path),
        engine_key=engine_key,
        engine_dir=engine_dir,
    )


def _engine_key(loaded: LoadedSpec, cache: CacheOptions, say: Say) -> str | None:
    files = engine_inputs(
        loaded.spec,
        loaded.source_path,
        toolkit_dir=TOOLKIT_DIR,
        external_data=external_data_files(loaded.source_path),
        model_dir=loaded.model_dir,
    )
    key = key_for(loaded.spec, loaded.source_path, files)
    if key is None and cache.enabled:
        say(
            f"engine cache off for this build: {builder_image(loaded.spec)} is not in the "
            "local Docker engine yet, so the key cannot be computed"
        )
    return key
