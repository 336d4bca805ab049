"""The Starlette app of the HTTP front end: Triton's URL layout (``src/http_server.cc``)
for what mmaas serves; any other path is 404 and a wrong method 405, both with a KServe
error body ``{"error"}``, and a bug is a logged 500 with one, never a bare page.

Model URLs take an optional ``/versions/{v}`` (the request path decides which versions
the model answers to, as for gRPC's ``model_version``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Route

from mmaas.server.http.endpoints import Endpoints
from mmaas.server.http.errors import http_exception, server_error
from mmaas.server.http.generate import GenerateEndpoints
from mmaas.server.http.infer import InferEndpoint
from mmaas.server.inference import InferencePath
from mmaas.server.repository import Repository

MODEL_PREFIXES = ("/v2/models/{model}", "/v2/models/{model}/versions/{version}")


def create_app(repository: Repository, read_timeout_s: float) -> Starlette:
    """The ASGI app serving the models of ``repository`` (``read_timeout_s``: seconds a
    request body may take to arrive)."""
    path = InferencePath(repository)
    endpoints = Endpoints(path)
    infer = InferEndpoint(path, read_timeout_s)
    generate = GenerateEndpoints(path, read_timeout_s)
    routes: list[BaseRoute] = [
        Route("/v2/health/live", endpoints.live, methods=["GET"]),
        Route("/v2/health/ready", endpoints.ready, methods=["GET"]),
        Route("/v2", endpoints.server_metadata, methods=["GET"]),
        Route("/v2/models/stats", endpoints.statistics, methods=["GET"]),
        Route("/v2/repository/index", endpoints.repository_index, methods=["POST"]),
    ]
    per_model: list[tuple[str, Callable[..., Any], str]] = [
        ("", endpoints.metadata, "GET"),
        ("/ready", endpoints.model_ready, "GET"),
        ("/config", endpoints.config, "GET"),
        ("/stats", endpoints.statistics, "GET"),
        ("/infer", infer.handle, "POST"),
        ("/generate", generate.generate, "POST"),
        ("/generate_stream", generate.generate_stream, "POST"),
    ]
    for prefix in MODEL_PREFIXES:
        routes += [Route(prefix + tail, call, methods=[method]) for tail, call, method in per_model]
    return Starlette(
        routes=routes,
        exception_handlers={HTTPException: http_exception, Exception: server_error},
    )
