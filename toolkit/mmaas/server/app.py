"""The runtime server: a ``grpc.aio`` server with the KServe v2 inference service, the
standard ``grpc.health.v1`` health service, gRPC reflection, the KServe v2 HTTP/REST
front end (:mod:`mmaas.server.http`, same loop, same request path) with the
OpenAI-compatible routes beside it on the same port (:mod:`mmaas.server.openai`), and
Prometheus metrics.

Life cycle (docs/design.md): read and self-check the manifest, register the models of
the repository (each ``loading``), open the port with health NOT_SERVING, re-hash the
engine (+ ``MMAAS_EXPECTED_ENGINE``), check the host, load ``MMAAS_INSTANCE_COUNT``
engines and warm them up at the opt shapes, start each model's executor, then SERVING.
Any failure before ready raises (``python -m mmaas.server`` prints one line and exits 1):
the model is never served. On SIGTERM: NOT_SERVING at once, new requests UNAVAILABLE, the
ports open ``MMAAS_SHUTDOWN_GRACE_S`` more while in-flight requests finish, then close,
release the shared memory regions and return (exit 0); SIGINT skips the open-port wait
(:mod:`.shutdown`).

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

from mmaas.core.endpoints import LIVENESS_SERVICE
from mmaas.core.errors import MmaasError
from mmaas.server import gpu_metrics
from mmaas.server.context import ServerContext
from mmaas.server.cpu_metrics import CpuMetrics
from mmaas.server.grpc.server import HEALTH_SERVICES, grpc_server
from mmaas.server.http.routes import create_app
from mmaas.server.http.server import HttpServer
from mmaas.server.llm_metrics import generation_lines
from mmaas.server.logs import configure
from mmaas.server.metrics import serve_http
from mmaas.server.models import attach_executors, close_executors, plan_repository, reloader
from mmaas.server.openai.routes import openai_routes
from mmaas.server.pipeline import LoadedEngine
from mmaas.server.repository import Repository
from mmaas.server.settings import Settings
from mmaas.server.shutdown import DRAIN_S, Signals, open_ports_wait
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
    repository = plan_repository(settings, started.manifest)
    loaded: dict[str, LoadedEngine] = {}  # filled once the engines are loaded
    health = HealthServicer()
    await _set_health(health, False)
    await health.set(LIVENESS_SERVICE, health_pb2.HealthCheckResponse.SERVING)

    async def changed() -> None:
        await _set_health(health, repository.ready)

    context = ServerContext.create(
        repository,
        reloader(settings, started.manifest, loaded),
        changed,
        settings.log_format,
        settings.log_level,
    )
    signals = Signals()
    server = grpc_server(settings, context, health)
    chat = openai_routes(context.plane, settings.http_read_timeout_s, settings.openai_api_key,
                         settings.fetch)  # fmt: skip
    http = HttpServer(create_app(context, settings.http_read_timeout_s, chat), settings)
    metrics_http = _serve_metrics(settings, repository)
    await server.start()
    if settings.http_port:
        await http.start()
    try:
        await _serve_until_stopped(
            settings, started, context, health, (server, http), signals, loaded
        )
    finally:
        await http.stop(0)
        await server.stop(0)
        if released := context.shm.close():
            log.info("released %d shared memory region(s)", released)
        if metrics_http is not None:
            metrics_http.shutdown()


async def _serve_until_stopped(
    settings: Settings,
    started: BringUp,
    context: ServerContext,
    health: HealthServicer,
    servers: tuple[Any, HttpServer],
    signals: Signals,
    loaded_engines: dict[str, LoadedEngine],
) -> None:
    """Wait for the bring-up, start the executors, mark every model ready and the server
    SERVING, wait for a stop signal, then shut down (:mod:`.shutdown`)."""
    manifest = started.manifest
    repository = context.repository
    bring_up: asyncio.Future[dict[str, list[Any]]] = asyncio.wrap_future(started.engines)
    engines, signum = await signals.unless_signalled(bring_up)
    if engines is not None:
        loaded_engines.update(await attach_executors(settings, manifest, repository, engines))
        repository.set_state("ready")
        await _set_health(health, repository.ready)
        log.info(
            "SERVING %s on %s:%d (gRPC)%s (%.2f s after process start)",
            repository.describe(),
            settings.host,
            settings.grpc_port,
            f" and :{settings.http_port} (HTTP)" if settings.http_port else "",
            _process_age(),
        )
        signum = await signals.next()
    repository.set_state("draining")
    await health.enter_graceful_shutdown()
    hold = open_ports_wait(signum, settings.shutdown_grace_s)
    log.info(
        "%s: draining: NOT_SERVING; ports open %.1f s more (in-flight requests finish, new "
        "ones get UNAVAILABLE; a second signal ends the wait)",
        signal.Signals(signum).name if signum else "stop",
        hold,
    )
    if hold and not await signals.hold(hold):
        log.info("grace period over: closing the ports")
    grpc_front, http = servers
    # in-flight requests finish (cancelled after DRAIN_S)
    await asyncio.gather(grpc_front.stop(DRAIN_S), http.stop(DRAIN_S))
    await close_executors(repository, loaded_engines)
    log.info("stopped")


async def _set_health(health: HealthServicer, serving: bool) -> None:
    status = (
        health_pb2.HealthCheckResponse.SERVING
        if serving
        else health_pb2.HealthCheckResponse.NOT_SERVING
    )
    for name in HEALTH_SERVICES:
        await health.set(name, status)


def _serve_metrics(settings: Settings, repository: Repository) -> Any:
    if not settings.metrics_port:
        return None
    try:
        cpu = CpuMetrics()
        families = [cpu.exposition, gpu_metrics.lines, lambda: generation_lines(repository)]
        return serve_http(settings.host, settings.metrics_port, repository.metrics, families)
    except OSError as exc:
        raise MmaasError(
            f"cannot serve metrics on {settings.host}:{settings.metrics_port} "
            f"(MMAAS_METRICS_PORT): {exc}; set another port or 0 to turn "
            "metrics off"
        ) from None


def _process_age() -> float:
    """Seconds since this process started (Linux /proc), for the ready log line."""
    try:
        start_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")
