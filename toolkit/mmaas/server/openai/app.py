"""The OpenAI-compatible front end as one app mounted at ``/v1`` on the HTTP port, so that
everything under ``/v1`` answers in OpenAI's error shape (``{"error": {"message", "type",
"param", "code"}}``, :mod:`.errors`), not KServe's ``{"error": "<message>"}``: an unknown
path (404), a wrong method (405, with ``Allow``), a bug (a logged 500), and KServe's
``Inference-Header-Content-Length`` (Triton's binary tensor data header, meaningless
here: refused 400 rather than ignored, as a client that sends it expects binary data to
be read).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount

from mmaas.server.openai.errors import ChatError, error_response

PREFIX = "/v1"
BINARY_HEADER = b"inference-header-content-length"
log = logging.getLogger("mmaas.server")


def mounted(routes: Sequence[BaseRoute]) -> Mount:
    """``routes`` (paths relative to ``/v1``) as the app mounted at ``/v1``."""
    app = Starlette(
        routes=list(routes),
        middleware=[Middleware(BinaryHeaderRefusal)],
        exception_handlers={HTTPException: http_error, Exception: server_error},
    )
    return Mount(PREFIX, app=app)


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own 404 (no route) and 405 (wrong method) in OpenAI's shape."""
    assert isinstance(exc, HTTPException)
    path = f"{request.method} {request.url.path}"
    if exc.status_code == 404:
        message = f"{path}: no such route (POST /v1/chat/completions, GET /v1/models)"
        error = ChatError(message, None, 404, "not_found")
    elif exc.status_code == 405:
        allowed = (exc.headers or {}).get("Allow", "")
        error = ChatError(f"{path}: method not allowed (allowed: {allowed})", None, 405,
                          "method_not_allowed")  # fmt: skip
    else:
        error = ChatError(f"{path}: {exc.detail}", None, exc.status_code)
    response = error_response(error)
    response.headers.update(exc.headers or {})
    return response


async def server_error(request: Request, exc: Exception) -> Response:
    """A bug: logged with its traceback, answered 500 in OpenAI's shape."""
    log.error("HTTP %s %s failed", request.method, request.url.path, exc_info=exc)
    message = f"internal server error: {type(exc).__name__}: {exc}"
    return error_response(ChatError(message, None, 500, None, "server_error"))


class BinaryHeaderRefusal:
    """ASGI middleware: a request carrying ``Inference-Header-Content-Length`` is answered
    400 naming the header, its value(s) and the route, before the route runs."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Refuse, or pass the request on to the app."""
        values = [
            value.decode("latin-1")
            for name, value in scope.get("headers", ())
            if name.lower() == BINARY_HEADER
        ]
        if scope["type"] != "http" or not values:
            await self.app(scope, receive, send)
            return
        message = (
            f"Inference-Header-Content-Length {', '.join(map(repr, values))} is KServe's "
            f"binary tensor data header; {scope['method']} {scope['path']} takes JSON: "
            "drop the header"
        )
        error = ChatError(message, None, 400, "invalid_header")
        await error_response(error)(scope, receive, send)
