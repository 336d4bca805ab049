"""KServe v2 HTTP errors: the body ``{"error": "<message>"}`` with ``Content-Type:
application/json`` (exactly: the KServe SDK shows the message only then), and the HTTP
status of each request-path status name (Triton's ``HttpCodeFromError``,
``src/http_server.cc``; KServe's REST server answers 404 for an unknown model too).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from mmaas.server.inference import Failure, failure_of
from mmaas.server.status import RequestError

JSON = "application/json"
HTTP_STATUS = {
    "INVALID_ARGUMENT": 400,
    "ALREADY_EXISTS": 400,
    "FAILED_PRECONDITION": 400,
    "CANCELLED": 400,
    "OUT_OF_RANGE": 400,
    "NOT_FOUND": 404,
    "RESOURCE_EXHAUSTED": 429,
    "UNIMPLEMENTED": 501,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
    "INTERNAL": 500,
}
log = logging.getLogger("mmaas.server")


class HttpError(RequestError):
    """A request refused by the HTTP layer itself with an explicit HTTP ``code`` (413 for
    a body over the limit, 408 for a body that does not arrive, 415 for an unknown
    ``Content-Encoding``); ``status`` is the request-path name it counts as."""

    def __init__(self, code: int, message: str, status: str = "INVALID_ARGUMENT") -> None:
        super().__init__(message)
        self.code = code
        self.status = status


def json_response(document: Any, status_code: int = 200) -> Response:
    """``document`` as JSON (orjson) with ``Content-Type: application/json``."""
    return Response(orjson.dumps(document), status_code=status_code, media_type=JSON)


def error_response(message: str, status_code: int) -> Response:
    """The KServe v2 error body ``{"error": message}`` with ``status_code``."""
    return json_response({"error": message}, status_code)


def failure_response(failure: Failure, exc: Exception | None = None) -> Response:
    """How the request path's :class:`Failure` is answered over HTTP."""
    code = exc.code if isinstance(exc, HttpError) else HTTP_STATUS.get(failure.status, 500)
    return error_response(failure.message, code)


async def http_exception(request: Request, exc: Exception) -> Response:
    """Starlette's own 404 (no route) and 405 (wrong method), as KServe error bodies."""
    assert isinstance(exc, HTTPException)
    headers = getattr(exc, "headers", None)
    response = error_response(exc.detail, exc.status_code)
    if headers:
        response.headers.update(headers)
    return response


async def server_error(request: Request, exc: Exception) -> Response:
    """A bug: logged with its traceback, answered 500 with a KServe error body."""
    log.error("HTTP %s %s failed", request.method, request.url.path, exc_info=exc)
    return error_response(f"internal server error: {type(exc).__name__}: {exc}", 500)


async def answer(method: Callable[[Request], Awaitable[Response]], request: Request) -> Response:
    """``method(request)``, or the KServe error body of the request error it raises."""
    try:
        return await method(request)
    except RequestError as exc:
        return failure_response(failure_of(exc), exc)
