"""OpenAI's error body, ``{"error": {"message", "type", "param", "code"}}``, and the HTTP
status of every failure: a 4xx for each client mistake (the openai SDK retries 408, 409,
429 and every 5xx, so a malformed request answered 5xx would arrive three times), 5xx only
for the server's own trouble (loading, draining, an engine failure).

The request path's failures name the interface's inputs (``input 'max_tokens': ...``,
``input 'image' element 1: ...``): :func:`failure_error` points ``param`` at the request
field they came from (``max_completion_tokens``, ``messages[0].content[2].image_url.url``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import orjson
from starlette.responses import Response

from mmaas.server.inference import Failure

if TYPE_CHECKING:
    from mmaas.server.openai.request import ChatRequest

STATUS = {  # request-path status -> (HTTP status, OpenAI error type)
    "INVALID_ARGUMENT": (400, "invalid_request_error"),
    "NOT_FOUND": (404, "invalid_request_error"),
    "RESOURCE_EXHAUSTED": (429, "rate_limit_error"),
    "CANCELLED": (400, "invalid_request_error"),
    "UNAVAILABLE": (503, "server_error"),
    "DEADLINE_EXCEEDED": (504, "server_error"),
}
INPUT = re.compile(r"^input '(\w+)'(?: element (\d+))?")
MESSAGE = re.compile(r"^: (messages\[\d+\][\w.\[\]]*)")
TOO_LARGE = "over the server's limit"


class ChatError(Exception):
    """A request OpenAI's API answers with 4xx: ``status``, ``message``, ``param`` (the
    field at fault, dotted with indices), ``code`` and ``type`` of OpenAI's error body."""

    def __init__(
        self, message: str, param: str | None = None, status: int = 400,
        code: str | None = None, kind: str = "invalid_request_error",
    ) -> None:  # fmt: skip
        super().__init__(message)
        self.message, self.param, self.status, self.code, self.kind = (
            message, param, status, code, kind,
        )  # fmt: skip


def error_body(error: ChatError) -> bytes:
    """The JSON of OpenAI's error object."""
    fields = {"message": error.message, "type": error.kind, "param": error.param,
              "code": error.code}  # fmt: skip
    return orjson.dumps({"error": fields})


def error_response(error: ChatError) -> Response:
    """The error as an HTTP response with its status."""
    return Response(error_body(error), error.status, media_type="application/json")


def failure_error(failure: Failure, chat: ChatRequest | None) -> ChatError:
    """The request path's failure as OpenAI's error (see the module docstring)."""
    status, kind = STATUS.get(failure.status, (500, "server_error"))
    code = None
    if failure.status == "NOT_FOUND":
        code = "model_not_found"
    if failure.status == "RESOURCE_EXHAUSTED" and TOO_LARGE in failure.message:
        status, kind = 413, "invalid_request_error"  # a message over the size limit
    return ChatError(failure.message, _param(failure.message, chat), status, code, kind)


def _param(message: str, chat: ChatRequest | None) -> str | None:
    """The request field an ``input '...'`` message is about, or None."""
    match = INPUT.match(message)
    if match is None or chat is None:
        return None
    name, element = match.group(1), match.group(2)
    if name == "image":
        index = int(element) if element is not None else len(chat.pictures)
        return chat.pictures[index][0] if index < len(chat.pictures) else "messages"
    if name == "messages":  # the runtime's conversation has the request's indices
        element = MESSAGE.match(message[match.end() :])
        return element.group(1) if element else "messages"
    return chat.names.get(name, name)
