"""The Starlette app of the HTTP front end: Triton's URL layout (``src/http_server.cc``)
for what mmaas serves; any other path is 404 and a wrong method 405, both with a KServe
error body ``{"error"}``, and a bug is a logged 500 with one, never a bare page.
``Inference-Header-Content-Length`` on any endpoint but ``/infer`` is a 400
(:class:`~mmaas.server.http.binary_header.BinaryHeaderGuard`).

Model URLs take an optional ``/versions/{v}`` (the data plane decides which versions
the model answers to, as for gRPC's ``model_version``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Route

from mmaas.server.context import ServerContext
from mmaas.server.http.binary_header import BinaryHeaderGuard
from mmaas.server.http.control import ControlEndpoints
from mmaas.server.http.endpoints import Endpoints
from mmaas.server.http.errors import http_exception, server_error
from mmaas.server.http.generate import GenerateEndpoints
from mmaas.server.http.infer import InferEndpoint
from mmaas.server.http.shm import SharedMemoryEndpoints

MODEL_PREFIXES = ("/v2/models/{model}", "/v2/models/{model}/versions/{version}")


def create_app(
    context: ServerContext, read_timeout_s: float, extra: Sequence[BaseRoute] = ()
) -> Starlette:
    """The ASGI app over the server's shared parts (``context``: repository, data plane,
    shared memory, model control, log settings; ``read_timeout_s``: seconds a
    request body may take to arrive; ``extra``: routes of other front ends on this port,
    e.g. the OpenAI-compatible ones, mounted by the server's app)."""
    plane = context.plane
    endpoints = Endpoints(plane)
    control = ControlEndpoints(context)
    infer = InferEndpoint(plane, read_timeout_s)
    generate = GenerateEndpoints(plane, read_timeout_s)
    routes: list[BaseRoute] = [
        Route("/v2/health/live", endpoints.live, methods=["GET"]),
        Route("/v2/health/ready", endpoints.ready, methods=["GET"]),
        Route("/v2", endpoints.server_metadata, methods=["GET"]),
        Route("/v2/models/stats", endpoints.statistics, methods=["GET"]),
        Route("/v2/repository/index", control.index, methods=["POST"]),
        Route("/v2/repository/models/{model}/load", control.load, methods=["POST"]),
        Route("/v2/repository/models/{model}/unload", control.unload, methods=["POST"]),
        Route("/v2/logging", control.logging, methods=["GET", "POST"]),
        Route("/v2/trace/setting", control.trace, methods=["GET", "POST"]),
        *_shared_memory_routes(SharedMemoryEndpoints(context.shm)),
    ]
    per_model: list[tuple[str, Callable[..., Any], list[str]]] = [
        ("", endpoints.metadata, ["GET"]),
        ("/ready", endpoints.model_ready, ["GET"]),
        ("/config", endpoints.config, ["GET"]),
        ("/stats", endpoints.statistics, ["GET"]),
        ("/trace/setting", control.trace, ["GET", "POST"]),
        ("/infer", infer.handle, ["POST"]),
        ("/generate", generate.generate, ["POST"]),
        ("/generate_stream", generate.generate_stream, ["POST"]),
    ]
    for prefix in MODEL_PREFIXES:
        routes += [Route(prefix + tail, call, methods=methods) for tail, call, methods in per_model]
    routes += extra
    return Starlette(
        routes=routes,
        middleware=[Middleware(BinaryHeaderGuard)],
        exception_handlers={HTTPException: http_exception, Exception: server_error},
    )


def _shared_memory_routes(memory: SharedMemoryEndpoints) -> list[BaseRoute]:
    """``/v2/{system,cuda}sharedmemory[/region/{name}]/{status,register,unregister}``."""
    routes: list[BaseRoute] = []
    for kind, (status, register, unregister) in (
        ("system", (memory.status, memory.register, memory.unregister)),
        ("cuda", (memory.cuda_status, memory.cuda_register, memory.cuda_unregister)),
    ):
        base = f"/v2/{kind}sharedmemory"
        routes += [
            Route(f"{base}/status", status, methods=["GET"]),
            Route(f"{base}/region/{{name}}/status", status, methods=["GET"]),
            Route(f"{base}/region/{{name}}/register", register, methods=["POST"]),
            Route(f"{base}/unregister", unregister, methods=["POST"]),
            Route(f"{base}/region/{{name}}/unregister", unregister, methods=["POST"]),
        ]
    return routes
