"""Triton's model repository, logging and trace extensions over HTTP, each a thin edge
over the server's one implementation (:class:`mmaas.server.context.ServerContext`, shared
with gRPC): ``POST /v2/repository/index`` (``{"ready": bool}`` optional),
``POST /v2/repository/models/{m}/load`` / ``unload`` (``{"parameters": {...}}``
optional), ``GET|POST /v2/logging`` and ``GET|POST /v2[/models/{m}]/trace/setting``
(trace settings answered OFF, a change refused by name). Documents follow
``docs/protocol/extension_{model_repository,logging,trace}.md``.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from mmaas.server.context import ServerContext
from mmaas.server.http.errors import answer, json_response
from mmaas.server.log_settings import trace_settings
from mmaas.server.status import InvalidArgument


class ControlEndpoints:
    """The endpoints over one server context."""

    def __init__(self, context: ServerContext) -> None:
        self.context = context

    async def index(self, request: Request) -> Response:
        """The served models with their states (Triton's ``RepositoryIndex``)."""
        return await answer(self._index, request)

    async def load(self, request: Request) -> Response:
        """(Re)load a model as Triton's explicit model control does."""
        return await answer(self._load, request)

    async def unload(self, request: Request) -> Response:
        """Unload a model (its requests get 503 until it is loaded again)."""
        return await answer(self._unload, request)

    async def logging(self, request: Request) -> Response:
        """``GET`` the log settings, or ``POST`` changes to them (all or none)."""
        return await answer(self._logging, request)

    async def trace(self, request: Request) -> Response:
        """``GET`` or ``POST`` the trace settings (see the module docstring)."""
        return await answer(self._trace, request)

    async def _index(self, request: Request) -> Response:
        document = await _json_object(request, "the repository index request")
        ready = document.get("ready", False)
        if not isinstance(ready, bool):
            raise InvalidArgument("'ready' in the repository index request must be true or false")
        entries = self.context.control.index(ready)
        return json_response([entry.__dict__ for entry in entries])

    async def _load(self, request: Request) -> Response:
        parameters = await _parameters(request, "load")
        await self.context.control.load(request.path_params["model"], parameters)
        return json_response({})

    async def _unload(self, request: Request) -> Response:
        parameters = await _parameters(request, "unload")
        await self.context.control.unload(request.path_params["model"], parameters)
        return json_response({})

    async def _logging(self, request: Request) -> Response:
        logs = self.context.logs
        if request.method == "GET":
            return json_response(logs.current())
        return json_response(logs.update(await _json_object(request, "the log settings")))

    async def _trace(self, request: Request) -> Response:
        if "model" in request.path_params:
            self.context.plane.lookup(request.path_params["model"], "")
        changes = (
            {} if request.method == "GET" else await _json_object(request, "the trace settings")
        )
        lists = {
            key: value if isinstance(value, list) else [value] for key, value in changes.items()
        }
        for key, values in lists.items():
            if not all(isinstance(value, str) for value in values):
                raise InvalidArgument(f"trace setting {key!r} takes a string or a list of strings")
        return json_response(trace_settings(lists))


async def _parameters(request: Request, what: str) -> dict[str, Any]:
    parameters = (await _json_object(request, f"the {what} request")).get("parameters", {})
    if not isinstance(parameters, dict):
        raise InvalidArgument(f"'parameters' of the {what} request must be a JSON object")
    return parameters


async def _json_object(request: Request, what: str) -> dict[str, Any]:
    body = await request.body()
    if not body.strip():
        return {}
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidArgument(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise InvalidArgument(f"{what} must be a JSON object")
    return document
