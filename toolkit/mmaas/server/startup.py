"""Start-up ahead of the server: the model's bring-up (re-hash the engine, check the host,
load and warm up the instances: :mod:`mmaas.server.runtime`) runs in a thread started
before the front ends are even imported, so that the engine's load and warm-up (ONNX
Runtime releases the GIL while it runs) overlap the imports and the set-up of the gRPC
server. Imports only the manifest here; the back end and numpy load in that thread.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from mmaas.core.manifest import Manifest, read_manifest
from mmaas.server.ports import check_free
from mmaas.server.settings import Settings


@dataclass(frozen=True)
class BringUp:
    """A started bring-up: the self-checked manifest and the future engine instances
    (its exception is the start-up failure: IntegrityError, CompatibilityError...)."""

    manifest: Manifest
    engines: Future[list[Any]]


def begin(settings: Settings) -> BringUp:
    """Check that the ports are free, read and self-check the manifest, then start the
    bring-up in a thread (so a start-up failure up to here is one line and nothing else).

    Raises:
        MmaasError: a port is taken. IntegrityError: the manifest is missing or altered.
    """
    check_free(settings.host, settings.grpc_port, "MMAAS_GRPC_PORT")
    if settings.metrics_port:
        fix = "set another port or 0 to turn metrics off"
        check_free(settings.host, settings.metrics_port, "MMAAS_METRICS_PORT", fix)
    manifest = read_manifest(settings.model_dir)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mmaas-bring-up")
    engines = pool.submit(bring_up, settings, manifest)
    pool.shutdown(wait=False)
    return BringUp(manifest, engines)


def bring_up(settings: Settings, manifest: Manifest) -> list[Any]:
    """Verify the engine and the host, then load and warm up the instances."""
    from mmaas.server import runtime

    runtime.verify(settings, manifest)
    return runtime.load_instances(settings, manifest)
