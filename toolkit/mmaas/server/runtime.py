"""Start-up of the served model: verify, load the engine instances, warm them up.

The order is the design's (docs/design.md, "Runtime server settings"): the manifest
self-checks (:func:`mmaas.core.manifest.read_manifest`), the engine is re-hashed against it
(:func:`mmaas.core.manifest.verify_engine`) and against the deployer's ``MMAAS_EXPECTED_ENGINE``
pin, the back end checks this host can run it (:meth:`Backend.check_compatible`), then
``instance_count`` engines are loaded and each runs at the profile's opt shapes.
"""

from __future__ import annotations

import logging
import math
import os
import time

from mmaas.backends import Engine, get_runtime
from mmaas.core.datatypes import element_size
from mmaas.core.errors import IntegrityError
from mmaas.core.manifest import Manifest, ModelInfo, verify_engine
from mmaas.core.samples import profile_shape, sample_inputs
from mmaas.server.settings import MIN_MESSAGE_SIZE, Settings

log = logging.getLogger("mmaas.server")


def verify(settings: Settings, manifest: Manifest) -> None:
    """Re-hash the engine, compare it with ``MMAAS_EXPECTED_ENGINE``, check the host.

    Raises:
        IntegrityError: the engine differs from the manifest or from the pin.
        CompatibilityError: the engine was built for another host or back-end version.
        UsageError: the manifest names an unknown back end.
    """
    started = time.perf_counter()
    actual = verify_engine(settings.model_dir, manifest)
    if settings.expected_engine and actual.blake3 != settings.expected_engine:
        raise IntegrityError(
            f"{settings.model_dir / manifest.engine.path}: engine is {actual.blake3}, but "
            f"MMAAS_EXPECTED_ENGINE pins {settings.expected_engine}; refusing to serve it"
        )
    get_runtime(manifest.model.backend).check_compatible(manifest)
    log.info(
        "engine verified: %s %s (%.0f ms)",
        manifest.engine.path,
        actual.blake3,
        (time.perf_counter() - started) * 1000,
    )


def load_instances(settings: Settings, manifest: Manifest) -> list[Engine]:
    """Load ``settings.instance_count`` engines, each with :func:`threads_per_instance`
    intra-op threads, and warm each up ``settings.warmup_runs`` times at the opt shapes.

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
        engine = backend.load(settings.model_dir, manifest, threads)
        for _ in range(settings.warmup_runs):
            engine.infer(warmup, outputs)
        log.info(
            "instance %d loaded with %d threads, %d warm-up runs at %s (%.0f ms)",
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
