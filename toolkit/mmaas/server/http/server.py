"""The HTTP server under the front end's ASGI app: Granian's embedded server, run as a
task of the server's one asyncio loop beside ``grpc.aio`` (one scheduler, one metrics
object). Chosen by measurement (docs/http.md); the app is plain ASGI, so
``uvicorn.Server(uvicorn.Config(app, host, port, http="httptools")).serve()`` is the
one-line fallback in :meth:`HttpServer.start`.

TLS follows the gRPC port's (``MMAAS_TLS_CERT``/``MMAAS_TLS_KEY``, mutual with
``MMAAS_TLS_CLIENT_CA``). Granian's ``backpressure`` (requests handed to Python at once)
is the socket backlog (1024) or twice ``MMAAS_MAX_QUEUE_SIZE``, whichever is larger: above
the queue plus the requests running (an instance's batch, a pipeline's sequence slots, open
streams), so the request path's queue limit (429), not a stalled socket, answers overload.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from granian.constants import HTTPModes, Interfaces, SSLProtocols
from granian.http import HTTP1Settings
from granian.log import LogLevels
from granian.server.embed import Server

from mmaas.core.errors import MmaasError
from mmaas.server.ports import check_free, listen_address
from mmaas.server.settings import Settings

BACKLOG = 1024  # connections the socket holds before accept
GRANIAN_LOGGER = "_granian"  # Granian's (and its Rust part's) logger
log = logging.getLogger("mmaas.server")


class HttpServer:
    """The ASGI ``app`` on ``MMAAS_HOST:MMAAS_HTTP_PORT`` (see the module docstring)."""

    def __init__(self, app: Any, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self.task: asyncio.Task[None] | None = None
        tls = settings.tls
        self.server = Server(
            app,
            address=settings.host.strip("[]"),
            port=settings.http_port,
            interface=Interfaces.ASGINL,
            http=HTTPModes.auto,
            websockets=False,
            backlog=BACKLOG,
            backpressure=max(BACKLOG, 2 * settings.batching.max_queue_size),
            http1_settings=HTTP1Settings(
                header_read_timeout=int(settings.http_read_timeout_s * 1000)
            ),
            log_level=LogLevels.warning,
            ssl_cert=tls.cert if tls else None,
            ssl_key=tls.key if tls else None,
            ssl_ca=tls.client_ca if tls else None,
            ssl_client_verify=bool(tls and tls.client_ca),
            ssl_protocol_min=SSLProtocols.tls12,
        )
        _route_granian_logs()

    async def start(self) -> None:
        """Bind the port and start serving (returns once it listens).

        Raises:
            MmaasError: the port cannot be bound.
        """
        check_free(self.settings.host, self.settings.http_port, "MMAAS_HTTP_PORT")
        self.task = asyncio.get_running_loop().create_task(self.server.serve())
        await asyncio.sleep(0)  # serve() binds and spawns its worker before its first await
        if self.task.done() and self.task.exception() is not None:
            address = listen_address(self.settings.host, self.settings.http_port)
            raise MmaasError(
                f"cannot listen on {address} (MMAAS_HTTP_PORT): {self.task.exception()}"
            )

    async def stop(self, grace_s: float) -> None:
        """Stop taking connections, let in-flight requests finish for up to ``grace_s``
        seconds, then close what is left."""
        if self.task is None or self.task.done():
            return
        self.server.workers_kill_timeout = max(1, round(grace_s))
        self.server.stop()
        try:
            await asyncio.wait_for(asyncio.shield(self.task), grace_s + 5)
        except TimeoutError:
            self.task.cancel()


class _Experimental(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "experimental" not in record.getMessage()


def _route_granian_logs() -> None:
    """Granian's warnings and errors through mmaas's handler (text or JSON lines on
    stderr), without its notice that the embedded server is experimental (docs/http.md
    weighs that)."""
    granian = logging.getLogger(GRANIAN_LOGGER)
    granian.handlers[:] = logging.getLogger("mmaas").handlers
    granian.setLevel(logging.WARNING)
    granian.propagate = False
    granian.filters[:] = [_Experimental()]
