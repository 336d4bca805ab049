"""Start-up ahead of the server: the model's bring-up (re-hash the engines and assets,
check the host, load and warm up each engine's instances: :mod:`mmaas.server.runtime`)
runs in a thread started
before the front ends are even imported. The thread imports the back end's runtime part
(numpy, ONNX Runtime) first, while the main thread checks the image's sealed files (its
code among them: :func:`mmaas.core.image_seal.check_image`, before any front end's module
is imported) and then waits (:meth:`BringUp.wait_imported`); then the engine's hash
check, load and warm-up (blake3 and ONNX Runtime release the GIL) overlap the front ends'
imports and the gRPC server's set-up. Imports only the manifest here.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from mmaas.core.image_seal import check_image
from mmaas.core.model_manifest import ModelManifest, read_model_manifest
from mmaas.core.runtime_settings import GRPC_PORT, HTTP_PORT, METRICS_PORT
from mmaas.server.ports import check_free
from mmaas.server.settings import Settings

log = logging.getLogger("mmaas.server")


@dataclass(frozen=True)
class BringUp:
    """A started bring-up: the self-checked model manifest and the future engine
    instances by engine name (its exception is the start-up failure: IntegrityError,
    CompatibilityError...)."""

    manifest: ModelManifest
    engines: Future[dict[str, list[Any]]]
    imported: threading.Event

    def wait_imported(self, timeout_s: float = 60.0) -> None:
        """Wait until the bring-up thread has imported the back end (or failed)."""
        self.imported.wait(timeout_s)


def begin(settings: Settings) -> BringUp:
    """Check that the ports are free, read and self-check the manifest, start the
    bring-up in a thread, and meanwhile check the image's sealed files (so a start-up
    failure up to here is one line and nothing else).

    Raises:
        MmaasError: a port is taken. IntegrityError: the manifest is missing or altered, or
            a file of the image differs from its signed listing (and with trusted keys: no
            listing, or an interpreter that could run unlisted code).
    """
    if settings.http_port:
        check_free(
            settings.host,
            settings.http_port,
            HTTP_PORT.env,
            "set another port or 0 to turn HTTP off",
        )
    check_free(settings.host, settings.grpc_port, GRPC_PORT.env)
    if settings.metrics_port:
        fix = "set another port or 0 to turn metrics off"
        check_free(settings.host, settings.metrics_port, METRICS_PORT.env, fix)
    manifest = read_model_manifest(settings.model_dir)
    imported = threading.Event()
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mmaas-bring-up")
    engines = pool.submit(bring_up, settings, manifest, imported)
    pool.shutdown(wait=False)
    if checked := check_image(settings.model_dir, manifest, bool(settings.trusted_keys)):
        log.info("%s", checked)
    return BringUp(manifest, engines, imported)


def bring_up(
    settings: Settings, manifest: ModelManifest, imported: threading.Event
) -> dict[str, list[Any]]:
    """Import the back ends' runtime parts (then set ``imported``), verify the engines,
    assets and host, then load and warm up each engine's instances."""
    try:
        from mmaas.backends import get_runtime
        from mmaas.server import runtime

        for entry in manifest.engines:
            get_runtime(entry.manifest.model.backend)
    finally:
        imported.set()
    runtime.verify(settings, manifest)
    return {
        entry.name: runtime.load_instances(
            settings, settings.model_dir / entry.directory, entry.manifest
        )
        for entry in manifest.engines
    }
