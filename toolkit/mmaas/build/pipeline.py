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

What differs per back end comes from its build target (:class:`mmaas.backends.BuildTarget`):
checks before any Docker work (TensorRT: a GPU, C11, and the per-target tag), the compile
route (ONNX Runtime: inside the compile build; TensorRT: ``docker build --target builder``
then ``docker run --gpus all`` of it) and the labels it adds (TensorRT: C12). Checks of
the built image: :mod:`mmaas.build.verify`; ``mmaas serve``'s local compile:
:mod:`mmaas.build.local`. A rebuild whose build digest matches a verified image already in
the engine runs no Docker build at all (:mod:`mmaas.build.current`). The phases (``check``,
``compile``, ``package``, ``verify``) are reported through ``phase`` as they start.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import mmaas
from mmaas.backends import CompileBuild, get_target
from mmaas.build import docker as docker_engine
from mmaas.build.cache.key import builder_image, key_for
from mmaas.build.cache.reuse import CacheOptions, Say, keep_engine, note, reuse_engine
from mmaas.build.current import (
    CurrentImage,
    build_digest,
    current_image,
    labelled,
    record_build,
    records_root,
)
from mmaas.build.plan import ENGINE_CONTEXT, MODEL_DIR, BuildPlan, engine_inputs, make_plan
from mmaas.build.render import render_dockerfile
from mmaas.build.verify import check_labels, engine_labels
from mmaas.build.wheel import pack_wheel
from mmaas.core.files import atomic_write_text, link_or_copy
from mmaas.core.manifest import Manifest
from mmaas.core.model_dir import verify_model_dir
from mmaas.spec.load import LoadedSpec, load_spec
from mmaas.spec.onnx_graph import external_data_files

TOOLKIT_DIR = Path(mmaas.__file__).resolve().parent
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc")
Phase = Callable[[str, str], None]  # (phase, what): check, compile, package, verify


def no_phase(name: str, detail: str) -> None:
    """The default ``phase`` callback: phases are not shown."""


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
            (compiled), ``off``, or ``current``: the image was up to date, no Docker build ran.
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
    for wheel in plan.wheels:
        pack_wheel(wheel.packages, context / wheel.target, wheel.root)
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
    phase: Phase = no_phase,
) -> BuildResult:
    """Build, verify and label the image of ``model``: take the engine from the engine cache
    (local, then registry) or compile it in the compile build (and keep it), then package
    it in the package build; or, when the image of the same build digest is already there
    and checks out, return it without any Docker build. ``say`` reports hits, misses and
    dropped entries (default: one ``mmaas:`` line on stderr each); ``phase`` each phase.

    Raises:
        SpecError, DockerError, IntegrityError, BuildError: as their names say.
    """
    started = time.perf_counter()
    cache = cache or CacheOptions()
    loaded = load_spec(model)
    target = get_target(loaded.spec.backend)
    image = f"{loaded.spec.image_repository}:{loaded.spec.image_tag}"
    extra_tag = target.preflight(loaded.spec, image)  # before any Docker work (C11)
    phase("check", image)
    with docker_engine.inspections_once():
        key = _engine_key(loaded, cache, say)
        draft = _plan(loaded, ca_bundle, None, engine_key=key, engine_dir=Path(ENGINE_CONTEXT))
        digest, records = build_digest(draft, [key], revision), records_root(cache.root)
    if digest and cache.enabled and cache.reuse_image:
        found, why = current_image(image, digest, records)
        if why:
            say(why)
        if found is not None:
            _tag(found.image, extra_tag, say)
            return _result(found, started, key, "current")
    with tempfile.TemporaryDirectory(prefix="mmaas-build-") as scratch:
        work = Path(scratch)
        reuse = reuse_engine(loaded.spec.name, key, cache, work / "cached", say)
        if not reuse.hit:
            phase("compile", loaded.spec.name)
        engine_dir = reuse.path or compile_engine(loaded, key, work, ca_bundle)
        if key is not None and not reuse.hit:
            keep_engine(loaded.spec.name, key, engine_dir, cache, say)
        plan = _plan(loaded, ca_bundle, None, engine_key=key, engine_dir=engine_dir)
        phase("package", plan.image)
        built = _build(plan, work / "package", plan.image)
        phase("verify", plan.image)
        manifest = verify_model_dir(docker_engine.copy_from_image(built, MODEL_DIR, work / "model"))
        labels = {**engine_labels(manifest, plan.digest, revision), **target.labels(manifest)}
        labels = labelled(labels, digest)
        image_id = docker_engine.add_labels(plan.image, labels)
        check_labels(plan.image, manifest)
        done = CurrentImage(plan.image, image_id, labels, plan.digest, manifest)
        if digest and cache.enabled:
            record_build(records, digest, done, work / "model")
    _tag(plan.image, extra_tag, say)
    return _result(done, started, key, reuse.status)


def _tag(image: str, extra_tag: str | None, say: Say) -> None:
    if extra_tag:
        docker_engine.run(["tag", image, extra_tag], check=True)
        say(f"tagged {extra_tag} (this build's GPU target)")


def _result(image: CurrentImage, started: float, key: str | None, status: str) -> BuildResult:
    seconds = round(time.perf_counter() - started, 3)
    return BuildResult(
        image.image,
        image.image_id,
        image.manifest,
        image.labels,
        image.plan_digest,
        seconds,
        key,
        status,
    )


def compile_engine(
    loaded: LoadedSpec, key: str | None, work: Path, ca_bundle: Path | None = None
) -> Path:
    """Run the compile build of ``loaded`` through its back end's compile route
    (:meth:`mmaas.backends.BuildTarget.compile_engine`) and return the verified engine
    directory it wrote under ``work``.

    Raises:
        DockerError: the build failed (a failed gate or profile check names itself in the
            build output). BuildError: the GPU compile container failed. IntegrityError:
            the engine directory does not verify.
    """
    plan = _plan(loaded, ca_bundle, None, engine_key=key)
    tag = f"{loaded.spec.image_repository}:engine-{secrets.token_hex(6)}"
    build = CompileBuild(
        build=lambda stage: _build(plan, work / "compile", tag, stage),
        tag=tag,
        docker=docker_engine.client().argv(),
        work=work,
    )
    engine_dir = get_target(loaded.spec.backend).compile_engine(build)
    verify_model_dir(engine_dir)
    return engine_dir


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
