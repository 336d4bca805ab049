"""The OpenAI-compatible routes on the HTTP port (docs/openai.md): ``POST
/v1/chat/completions``, ``GET /v1/models`` and ``GET /v1/models/{id}``, listing the served
models with the generation interface, mounted at ``/v1`` so that every answer there,
errors included, has OpenAI's shape (:mod:`.app`). With an API key set (``MMAAS_OPENAI_API_KEY`` or
``MMAAS_OPENAI_API_KEY_FILE``), every route asks ``Authorization: Bearer <key>`` (401 with
OpenAI's error body otherwise; the key is compared in constant time).

This front end imports nothing of the KServe ones (gRPC, HTTP): the server's app
(:mod:`mmaas.server.app`) mounts these routes beside the KServe HTTP routes.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mmaas.server.dataplane import DataPlane
from mmaas.server.openai.app import mounted
from mmaas.server.openai.chat import ChatEndpoint, is_generation
from mmaas.server.openai.errors import ChatError, error_response
from mmaas.server.repository import ServedModel
from mmaas.server.settings import FetchSettings

Endpoint = Callable[[Request], Awaitable[Response]]


def openai_routes(
    plane: DataPlane, read_timeout_s: float, api_key: str | None, fetch: FetchSettings
) -> list[BaseRoute]:
    """The routes over the data plane, as one mount at ``/v1`` (``api_key``: None = no key
    asked; ``fetch``: how picture URLs are fetched)."""
    chat = ChatEndpoint(plane, read_timeout_s, fetch)

    async def models(request: Request) -> Response:
        listed = [_model(m) for m in plane.repository if is_generation(m)]
        return _json({"object": "list", "data": listed})

    async def model(request: Request) -> Response:
        name = request.path_params["model"]
        for served in plane.repository:
            if served.name == name and is_generation(served):
                return _json(_model(served))
        message = f"the model {name!r} does not exist (GET /v1/models lists the served ones)"
        return error_response(ChatError(message, "model", 404, "model_not_found"))

    def guarded(endpoint: Endpoint) -> Endpoint:
        if api_key is None:
            return endpoint

        async def checked(request: Request) -> Response:
            scheme, _, given = request.headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip(), api_key):
                return error_response(ChatError(
                    "Incorrect API key provided: send Authorization: Bearer <key>", None, 401,
                    "invalid_api_key",
                ))  # fmt: skip
            return await endpoint(request)

        return checked

    return [
        mounted([
            Route("/chat/completions", guarded(chat.handle), methods=["POST"]),
            Route("/models", guarded(models), methods=["GET"]),
            Route("/models/{model:path}", guarded(model), methods=["GET"]),
        ])
    ]  # fmt: skip


def _model(model: ServedModel) -> dict:
    return {"id": model.name, "object": "model", "created": 0, "owned_by": "mmaas"}


def _json(document: object) -> Response:
    return Response(orjson.dumps(document), media_type="application/json")
