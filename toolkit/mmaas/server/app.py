"""The runtime server: a ``grpc.aio`` server with the KServe v2 inference service, the
standard ``grpc.health.v1`` health service, gRPC reflection, the KServe v2 HTTP/REST
front end (:mod:`mmaas.server.http`, same loop, same request path) and Prometheus metrics.

Life cycle (docs/design.md): read and self-check the manifest, register the models of
the repository (each ``loading``), open the port with health NOT_SERVING, re-hash the
engine (+ ``MMAAS_EXPECTED_ENGINE``), check the host, load ``MMAAS_INSTANCE_COUNT``
engines and warm them up at the opt shapes, start each model's executor, then SERVING.
Any failure before ready raises (``python -m mmaas.server`` prints one line and exits 1):
the model is never served. On SIGTERM/SIGINT: NOT_SERVING, stop taking requests, finish
every in-flight and queued request within ``MMAAS_SHUTDOWN_GRACE_S``, return (exit 0).

Public entry point for ``mmaas serve`` and ``python -m mmaas.server``: :func:`serve`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path
from typing import Any

from grpc_health.v1 import health_pb2
from grpc_health.v1._async import HealthServicer

from mmaas.backends import get_runtime
from mmaas.core.errors import MmaasError
from mmaas.core.manifest import Manifest
from mmaas.server import runtime
from mmaas.server.batcher import Scheduler
from mmaas.server.grpc.server import HEALTH_SERVICES, grpc_server
from mmaas.server.http.routes import create_app
from mmaas.server.http.server import HttpServer
from mmaas.server.logs import configure
from mmaas.server.metrics import ModelMetrics, serve_http
from mmaas.server.repository import ConfigFacts, Executor, Repository, ServedModel
from mmaas.server.settings import Settings
from mmaas.server.startup import BringUp, begin

log = logging.getLogger("mmaas.server")


def serve(settings: Settings, started: BringUp | None = None) -> None:
    """Run the server until SIGTERM/SIGINT, then drain and return. Logs go to stderr as
    ``settings.log_format`` says.

    Args:
        settings: from :func:`mmaas.server.settings.from_env` (or built by ``mmaas serve``
            with ``model_dir`` pointing at a locally compiled model directory).
        started: a bring-up already under way (:func:`mmaas.server.startup.begin`), or
            None to start it here.

    Raises:
        IntegrityError: the manifest or engine was altered, or differs from the pin.
        CompatibilityError: the engine was built for another host.
        MmaasError: a port cannot be bound, or the engine fails to load or warm up.
    """
    configure(settings.log_format, settings.log_level)
    asyncio.run(run(settings, started))


async def run(settings: Settings, started: BringUp | None = None) -> None:
    """:func:`serve` as a coroutine (same contract) for callers with their own loop."""
    started = started or begin(settings)
    repository = Repository([_served_model(settings, started.manifest)])
    health = HealthServicer()
    for name in HEALTH_SERVICES:
        await health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
    server = grpc_server(settings, repository, health)
    http = HttpServer(create_app(repository, settings.http_read_timeout_s), settings)
    metrics_http = _serve_metrics(settings, repository)
    await server.start()
    if settings.http_port:
        await http.start()
    try:
        await _serve_until_stopped(settings, started, repository, health, (server, http))
    finally:
        await http.stop(0)
        await server.stop(0)
        if metrics_http is not None:
            metrics_http.shutdown()


async def _serve_until_stopped(
    settings: Settings,
    started: BringUp,
    repository: Repository,
    health: HealthServicer,
    servers: tuple[Any, HttpServer],
) -> None:
    """Wait for the bring-up, start the executors, mark every model ready and the server
    SERVING, wait for a stop signal, then drain."""
    stop = _stop_event()
    manifest = started.manifest
    executors: list[Executor] = []
    engines = await _until_stopped(asyncio.wrap_future(started.engines), stop)
    if engines is not None:
        model = repository.get(manifest.model.name, manifest.model.version)
        model.executor = Scheduler(engines, _max_batch(manifest), settings.batching, model.metrics)
        executors.append(model.executor)
        for executor in executors:
            executor.start()
        repository.set_state("ready")
        for name in HEALTH_SERVICES:
            await health.set(name, health_pb2.HealthCheckResponse.SERVING)
        log.info(
            "SERVING %s %s on %s:%d (gRPC)%s (%.2f s after process start)",
            manifest.model.name,
            manifest.model.version,
            settings.host,
            settings.grpc_port,
            f" and :{settings.http_port} (HTTP)" if settings.http_port else "",
            _process_age(),
        )
        await stop.wait()
    log.info("draining: finishing in-flight requests (grace %.1f s)", settings.shutdown_grace_s)
    repository.set_state("draining")
    await health.enter_graceful_shutdown()
    grpc_front, http = servers
    grace = settings.shutdown_grace_s
    await asyncio.gather(grpc_front.stop(grace), http.stop(grace))
    for executor in executors:
        await executor.close()
    log.info("stopped")


async def _until_stopped(work: Any, stop: asyncio.Event) -> Any:
    """Await ``work`` unless ``stop`` is set first (then None; ``work`` is left to end)."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop.wait())
    await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    return task.result() if task.done() else None


def _served_model(settings: Settings, manifest: Manifest) -> ServedModel:
    info = manifest.model
    batching = settings.batching.enabled and info.max_batch_size > 0
    runtime_part = get_runtime(info.backend)
    facts = ConfigFacts(
        platform=runtime_part.platform,
        device_kind=runtime_part.device_kind,
        instance_count=settings.instance_count,
        batching=batching,
        preferred_batch_sizes=settings.batching.preferred_batch_sizes,
        max_queue_delay_us=settings.batching.max_queue_delay_us,
    )
    return ServedModel(
        info=info,
        message_limit=runtime.message_limit(settings, info),
        metrics=ModelMetrics(info.name, info.version),
        config=facts,
    )


def _max_batch(manifest: Manifest) -> int:
    info = manifest.model
    if info.max_batch_size <= 0:
        return 0
    return min([info.max_batch_size, *(t.max[0] for t in info.inputs if t.max)])


def _serve_metrics(settings: Settings, repository: Repository) -> Any:
    if not settings.metrics_port:
        return None
    try:
        return serve_http(settings.host, settings.metrics_port, repository.metrics)
    except OSError as exc:
        raise MmaasError(
            f"cannot serve metrics on {settings.host}:{settings.metrics_port} "
            f"(MMAAS_METRICS_PORT): {exc}; set another port or 0 to turn "
            "metrics off"
        ) from None


def _stop_event() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    return stop


def _process_age() -> float:
    """Seconds since this process started (Linux /proc), for the ready log line."""
    try:
        start_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")
