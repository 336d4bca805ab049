"""``mmaas build``: load -> per engine: engine-cache key -> cached engine, or its compile
build (then keep the engine) -> the package build of all engines and assets -> check.

Each engine of a model compiles in a compile build of its own and is cached under its own
key (its engine view: :mod:`mmaas.spec.engines`), so changing one engine recompiles that
engine only; the package build stages them all (with the assets) and stamps one model
directory.

"Compile, then package", as the GPU route does: the compile build ends in the builder stage
whose engine directory is copied out, verified and stored in the engine cache (and pushed);
the package build stages that directory (or a cache hit: :mod:`mmaas.build.cache.reuse`) instead
of the ONNX file and only stamps it, so it is the same build either way. After the image is
built, its model directory is copied out and verified on the host (the manifest's
self-digest and the engine's hashes), and the engine's identity is added as labels
(``io.mmaas.engine.blake3`` ...), which are then read back and compared with the manifest:
an image whose labels, manifest and engine disagree is never tagged.

What differs per back end comes from its build target (:class:`mmaas.backends.targets.BuildTarget`):
checks before any Docker work (TensorRT: a GPU, C11, and the per-target tag), the compile
route (ONNX Runtime: inside the compile build; TensorRT: ``docker build --target builder``
then ``docker run --gpus all`` of it) and the labels it adds (TensorRT: C12). Checks of
the built image: :mod:`mmaas.build.verify`; ``mmaas serve``'s local compile:
:mod:`mmaas.build.local`. A rebuild whose build digest matches a verified image already in
the engine runs no Docker build at all (:mod:`mmaas.build.current`). The phases (``check``,
``compile``, ``package``, ``verify``) are reported through ``phase`` as they start.
"""

from __future__ import annotations

import secrets
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from mmaas.backends import get_target
from mmaas.build import docker as docker_engine
from mmaas.build.cache.key import builder_image, key_for
from mmaas.build.cache.registry import remove_image
from mmaas.build.cache.reuse import CacheOptions, Say, keep_engine, note, reuse_engine
from mmaas.build.compile import compile_engine, docker_build
from mmaas.build.context import (
    TOOLKIT_DIR,
    ca_bundle_of,
    engine_target,
    package_plan,
)
from mmaas.build.current import (
    CurrentImage,
    build_digest,
    current_image,
    labelled,
    record_build,
    records_root,
)
from mmaas.build.plan import MODEL_DIR, engine_inputs
from mmaas.build.provenance import host_provenance
from mmaas.build.signing import SigningKey, signature_labels
from mmaas.build.spec_checks import host_checks
from mmaas.build.verify import check_labels, engine_labels
from mmaas.core.model_dir import verify_model_dir
from mmaas.core.model_manifest import ModelManifest, stage_warnings
from mmaas.core.signing import SIGNATURE_NAME, Signature
from mmaas.spec.load import EngineSource, LoadedSpec, load_spec
from mmaas.spec.onnx_graph import external_data_files

Phase = Callable[[str, str], None]  # (phase, what): check, compile, package, verify


def no_phase(name: str, detail: str) -> None:
    """The default ``phase`` callback: phases are not shown."""


@dataclass(frozen=True)
class EngineBuild:
    """How one engine of a build was obtained: its engine-cache key (``sha256:<hex>``, None
    when unknown) and ``cache``: ``hit`` (local cache), ``hit-registry`` (pulled), ``miss``
    (compiled), ``off``, or ``current``: the image was up to date, no Docker build ran."""

    key: str | None
    cache: str


@dataclass(frozen=True)
class BuildResult:
    """A built, verified and labelled image.

    Attributes:
        image: the tag (``repository:tag``).
        image_id: ``sha256:<hex>`` of the labelled image.
        manifest: the model manifest as verified on the host.
        labels: the engine labels added after the build.
        plan_digest: digest of the package build's plan.
        seconds: wall time of the whole build, in seconds.
        engines: each engine's key and cache outcome, by engine name.
        signature: the manifest's signature (``--sign``), or None.
    """

    image: str
    image_id: str
    manifest: ModelManifest
    labels: dict[str, str]
    plan_digest: str
    seconds: float
    engines: Mapping[str, EngineBuild]
    signature: Signature | None = None

    @property
    def engine_key(self) -> str | None:
        """The engine-cache key of a single-engine model (None for several engines)."""
        keys = [build.key for build in self.engines.values()]
        return keys[0] if len(keys) == 1 else None

    @property
    def engine_cache(self) -> str:
        """The cache outcome: the engines' common one, or ``partial`` when they differ."""
        outcomes = {build.cache for build in self.engines.values()}
        return outcomes.pop() if len(outcomes) == 1 else "partial"


def build_image(
    model: Path,
    *,
    ca_bundle: Path | None = None,
    revision: str | None = None,
    cache: CacheOptions | None = None,
    signing: SigningKey | None = None,
    say: Say = note,
    phase: Phase = no_phase,
) -> BuildResult:
    """Build, verify and label the image of ``model``: take each engine from the engine
    cache (local, then registry) or compile it in its compile build (and keep it), then
    package them in the package build; or, when the image of the same build digest is
    already there and checks out, return it without any Docker build (never with
    ``signing``: a signed build always packages and signs anew). ``signing``: sign the
    verified manifest's digest and add the signature to the image (file + labels,
    :mod:`mmaas.build.signing`). ``say`` reports hits, misses and dropped entries (default:
    one ``mmaas:`` line on stderr each; ``engine <name>:`` first for several); ``phase``
    each phase.

    Raises:
        SpecError, DockerError, IntegrityError, BuildError: as their names say.
    """
    started = time.perf_counter()
    cache = cache or CacheOptions()
    loaded = load_spec(model, checks=host_checks())
    target = get_target(loaded.engines[0].spec.backend)
    image = f"{loaded.spec.image_repository}:{loaded.spec.image_tag}"
    tags = [target.preflight(e.spec, image) for e in loaded.engines]  # before Docker (C11)
    extra_tag = next((tag for tag in tags if tag), None)
    bundle = ca_bundle or ca_bundle_of(loaded)
    buildkit = docker_engine.client().buildkit
    phase("check", image)
    prefetch = [*(builder_image(e.spec) for e in loaded.engines), image]
    with docker_engine.inspections_once(prefetch):
        keys = {
            e.name: _engine_key(loaded, e, cache, _teller(loaded, e, say)) for e in loaded.engines
        }
        folders = {e.name: Path(engine_target(loaded, e.name)) for e in loaded.engines}
        provenance = host_provenance(
            {e.name: e.spec for e in loaded.engines}, loaded.model_dir, revision
        )
        draft = package_plan(loaded, keys, folders, bundle, buildkit, bool(signing), provenance)
        digest = build_digest(draft, list(keys.values()), revision)
        records = records_root(cache.root)
        found, why = None, ""
        if digest and cache.enabled and cache.reuse_image and signing is None:
            found, why = current_image(image, digest, records)
    if why:
        say(why)
    if found is not None:
        _tag(found.image, extra_tag, say)
        return _result(found, started, {n: EngineBuild(k, "current") for n, k in keys.items()})
    with tempfile.TemporaryDirectory(prefix="mmaas-build-") as scratch:
        work = Path(scratch)
        engine_dirs: dict[str, Path] = {}
        builds: dict[str, EngineBuild] = {}
        for engine in loaded.engines:
            tell, key = _teller(loaded, engine, say), keys[engine.name]
            folder = work / "engines" / engine.name
            folder.mkdir(parents=True)
            reuse = reuse_engine(loaded.spec.name, key, cache, folder / "cached", tell)
            if not reuse.hit:
                phase("compile", engine.spec.name)
            engine_dirs[engine.name] = reuse.path or compile_engine(
                loaded, engine, key, folder, bundle
            )
            if key is not None and not reuse.hit:
                keep_engine(loaded.spec.name, key, engine_dirs[engine.name], cache, tell)
            builds[engine.name] = EngineBuild(key, reuse.status)
        plan = package_plan(loaded, keys, engine_dirs, bundle, buildkit, bool(signing), provenance)
        phase("package", plan.image)
        # the package build gets a tag of its own, removed whatever happens: the image's
        # tag only ever names a labelled, verified image (an interrupted build leaves the
        # previous one, or none)
        package = f"{loaded.spec.image_repository}:package-{secrets.token_hex(6)}"
        try:
            docker_build(plan, work / "package", package)
            phase("verify", plan.image)
            copied = docker_engine.copy_from_image(package, MODEL_DIR, work / "model")
            manifest = verify_model_dir(copied)
            for line in stage_warnings(manifest):
                say(f"warning: {line}")
            labels = engine_labels(manifest, plan.digest, revision)
            for entry in manifest.engines:
                labels.update(target.labels(entry.manifest))
            signature, files = _signed(manifest, signing, say)
            if signature is not None:
                labels |= signature_labels(signature, MODEL_DIR)
            labels = labelled(labels, digest)
            image_id = docker_engine.add_labels(package, plan.image, labels, files)
        finally:
            remove_image(package)
        check_labels(plan.image, manifest)
        done = CurrentImage(plan.image, image_id, labels, plan.digest, manifest)
        if digest and cache.enabled:
            record_build(records, digest, done, work / "model")
    _tag(plan.image, extra_tag, say)
    return _result(done, started, builds, signature)


def _signed(
    manifest: ModelManifest, signing: SigningKey | None, say: Say
) -> tuple[Signature | None, dict[str, str]]:
    """The signature of ``manifest`` (None without ``signing``) and the files it adds to
    the image (path in the image -> text)."""
    if signing is None:
        return None, {}
    signature = signing.sign(manifest.manifest_digest)
    say(f"signed manifest {manifest.manifest_digest} with key {signature.key_id}")
    return signature, {f"{MODEL_DIR}/{SIGNATURE_NAME}": signature.to_json()}


def _tag(image: str, extra_tag: str | None, say: Say) -> None:
    if extra_tag:
        docker_engine.run(["tag", image, extra_tag], check=True)
        say(f"tagged {extra_tag} (this build's GPU target)")


def _result(
    image: CurrentImage,
    started: float,
    builds: Mapping[str, EngineBuild],
    signature: Signature | None = None,
) -> BuildResult:
    seconds = round(time.perf_counter() - started, 3)
    return BuildResult(
        image.image,
        image.image_id,
        image.manifest,
        image.labels,
        image.plan_digest,
        seconds,
        builds,
        signature,
    )


def _teller(loaded: LoadedSpec, engine: EngineSource, say: Say) -> Say:
    if len(loaded.engines) == 1:
        return say
    return lambda message: say(f"engine {engine.name}: {message}")


def _engine_key(
    loaded: LoadedSpec, engine: EngineSource, cache: CacheOptions, say: Say
) -> str | None:
    files = engine_inputs(
        engine.spec,
        engine.source_path,
        toolkit_dir=TOOLKIT_DIR,
        external_data=external_data_files(engine.source_path),
        model_dir=loaded.model_dir,
    )
    key = key_for(engine.spec, engine.source_path, files)
    if key is None and cache.enabled:
        say(
            f"engine cache off for this build: {builder_image(engine.spec)} is not in the "
            "local Docker engine yet, so the key cannot be computed"
        )
    return key
