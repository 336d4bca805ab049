"""Start-up of the served models: verify, load the engine instances, warm them up.

The order is the design's (docs/design.md, "Runtime server settings"): the manifest
self-checks (:func:`mmaas.core.model_manifest.read_model_manifest`), every engine, engine
data file and asset is re-hashed against it (:func:`mmaas.core.model_manifest.verify_model`),
the engine set is compared with the deployer's ``MMAAS_EXPECTED_ENGINE`` pin, each engine's
back end checks this host can run it (:meth:`Runtime.check_compatible`), then
``instance_count`` instances of each engine are loaded and each runs at the profile's opt
shapes.
"""

from __future__ import annotations

import logging
import math
import os
import time
from pathlib import Path

from mmaas.backends import Engine, get_runtime
from mmaas.core.datatypes import element_size
from mmaas.core.errors import IntegrityError
from mmaas.core.manifest import Manifest, ModelInfo
from mmaas.core.model_dir import describe
from mmaas.core.model_manifest import ModelManifest, engine_set_digest, verify_model
from mmaas.core.samples import profile_shape, sample_inputs
from mmaas.core.signing import verify_trusted
from mmaas.server.settings import MIN_MESSAGE_SIZE, Settings

log = logging.getLogger("mmaas.server")


def verify(settings: Settings, manifest: ModelManifest) -> None:
    """With ``MMAAS_TRUSTED_KEYS``, check the manifest's signature first; then re-hash
    every engine file and asset, compare the engine set with ``MMAAS_EXPECTED_ENGINE``,
    check the host can run every engine.

    Raises:
        IntegrityError: unsigned or not signed by a trusted key (keys set), a file differs
            from the manifest, or the engines from the pin.
        CompatibilityError: an engine was built for another host or back-end version.
        UsageError: the manifest names an unknown back end.
    """
    started = time.perf_counter()
    if settings.trusted_keys:
        signer = verify_trusted(
            settings.model_dir,
            manifest.manifest_digest,
            settings.trusted_keys,
            str(settings.model_dir),
        )
        log.info("manifest %s signed by trusted key %s", manifest.manifest_digest, signer.key_id)
    verify_model(settings.model_dir, manifest)
    actual = engine_set_digest(manifest)
    if settings.expected_engine and actual != settings.expected_engine:
        what = (
            f"{settings.model_dir / manifest.engines[0].manifest.engine.path}: engine is"
            if len(manifest.engines) == 1
            else f"{settings.model_dir}: the engine set ({len(manifest.engines)} engines) is"
        )
        raise IntegrityError(
            f"{what} {actual}, but MMAAS_EXPECTED_ENGINE pins {settings.expected_engine}; "
            "refusing to serve it"
        )
    for entry in manifest.engines:
        get_runtime(entry.manifest.model.backend).check_compatible(entry.manifest)
    log.info("verified: %s (%.0f ms)", describe(manifest), (time.perf_counter() - started) * 1000)


def load_instances(settings: Settings, directory: Path, manifest: Manifest) -> list[Engine]:
    """Load ``settings.instance_count`` instances of the engine ``manifest`` records in
    ``directory``, each with :func:`threads_per_instance` intra-op threads, and warm each
    up ``settings.warmup_runs`` times at the opt shapes.

    Raises:
        Exception: the back end's own error when the engine cannot be loaded or run.
    """
    backend = get_runtime(manifest.model.backend)
    threads = threads_per_instance(settings)
    warmup = sample_inputs(manifest.model, "opt")
    outputs = [tensor.name for tensor in manifest.model.outputs]
    engines: list[Engine] = []
    for _ in range(settings.instance_count):
        started = time.perf_counter()
        engine = backend.load(directory, manifest, threads)
        for _ in range(settings.warmup_runs):
            engine.infer(warmup, outputs)
        log.info(
            "%s: instance %d loaded with %d threads, %d warm-up runs at %s (%.0f ms)",
            manifest.model.name,
            len(engines),
            threads,
            settings.warmup_runs,
            _opt_shapes(manifest.model),
            (time.perf_counter() - started) * 1000,
        )
        engines.append(engine)
    return engines


def threads_per_instance(settings: Settings) -> int:
    """``MMAAS_THREADS``, or the usable cores shared out among the instances (>= 1), so
    that instances do not oversubscribe the CPU."""
    if settings.threads:
        return settings.threads
    return max(1, len(os.sched_getaffinity(0)) // settings.instance_count)


def message_limit(settings: Settings, model: ModelInfo) -> int:
    """Largest request or response in bytes: ``MMAAS_MAX_MESSAGE_SIZE``, else twice the
    bytes of all inputs at the profile's max shapes, at least 64 MiB."""
    if settings.max_message_size is not None:
        return settings.max_message_size
    at_max = sum(
        math.prod(profile_shape(t, "max")) * max(element_size(t.datatype), 1)
        for t in model.inputs
        if -1 not in profile_shape(t, "max")
    )
    return max(MIN_MESSAGE_SIZE, 2 * at_max)


def _opt_shapes(model: ModelInfo) -> str:
    return ", ".join(
        f"{t.name}: {'x'.join(map(str, profile_shape(t, 'opt')))}" for t in model.inputs
    )
