"""``Inference-Header-Content-Length`` (Triton's binary tensor data extension,
``docs/protocol/extension_binary_data.md``): the byte length of the JSON header at the
start of an ``/infer`` body, the binary tensor data following it. Read strictly: sent
once (two values, even equal ones, or one value a proxy joined with a comma, are refused:
which one would be the JSON header's length?), decimal digits only, within the body.
Every refusal names the header, the value sent and the body's length. Endpoints without a
binary part (generate, generate_stream, the repository, shared memory, logging...) refuse
the header outright (:class:`BinaryHeaderGuard`) instead of ignoring it: a client that
sends it expects binary data to be read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from mmaas.server.http.errors import error_response
from mmaas.server.status import InvalidArgument

HEADER = "Inference-Header-Content-Length"
DECIMAL = re.compile(r"[0-9]+")
RAW_HEADER = HEADER.lower().encode()
BINARY_ENDPOINT = "/infer"  # the one endpoint with a binary part
KSERVE = "/v2"  # other front ends on the port (OpenAI's /v1) answer for their own paths


def header_length(values: Sequence[str], body_size: int) -> int | None:
    """The JSON header's byte length from the ``Inference-Header-Content-Length`` values
    the request carries (None when it carries none: the whole body is JSON).

    Raises:
        InvalidArgument: the header sent more than once (even with equal values: one
            request has one JSON header), a value that is not one decimal byte count, or
            one outside 0..``body_size``; each names the header, its value and the body's
            length.
    """
    if not values:
        return None
    if len(values) > 1:
        raise InvalidArgument(
            f"{HEADER} is sent {len(values)} times ({', '.join(map(repr, values))}) for a "
            f"body of {body_size} bytes; send it once: the byte length of the JSON header "
            "at the start of the body"
        )
    value = values[0]
    if not DECIMAL.fullmatch(value.strip()):
        raise InvalidArgument(
            f"Unable to parse {HEADER}, got: {value!r} (body {body_size} bytes): it must be "
            "one byte count in decimal digits, the length of the JSON header at the start "
            "of the body"
        )
    length = int(value)
    if length > body_size:
        raise InvalidArgument(
            f"{HEADER} is {length}, but the body holds {body_size} bytes: it must be the "
            f"byte length of the JSON header at the start of the body (0..{body_size})"
        )
    return length


def header_note(json_length: int, body_size: int) -> str:
    """``Inference-Header-Content-Length: 40, body 120 bytes``: how a message about the
    JSON header or the binary part names the header, its value and the body's length."""
    return f"{HEADER}: {json_length}, body {body_size} bytes"


class BinaryHeaderGuard:
    """ASGI middleware: a request carrying ``Inference-Header-Content-Length`` to any
    KServe endpoint (``/v2/...``) but ``/infer`` is answered 400 (KServe error body)
    naming the header, its value(s), the body's declared length and the endpoint, before
    the endpoint runs."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Refuse, or pass the request on to the app."""
        path = scope.get("path", "")
        if scope["type"] != "http" or path.endswith(BINARY_ENDPOINT) or path[:3] != KSERVE:
            await self.app(scope, receive, send)
            return
        headers = [(name.lower(), value.decode("latin-1")) for name, value in scope["headers"]]
        values = [value for name, value in headers if name == RAW_HEADER]
        if not values:
            await self.app(scope, receive, send)
            return
        declared = next((value for name, value in headers if name == b"content-length"), None)
        size = f"body {declared} bytes" if declared is not None else "body length not declared"
        message = (
            f"{HEADER} {', '.join(map(repr, values))} ({size}) is for the binary tensor data "
            f"of /infer; {scope['method']} {scope['path']} takes no binary part: drop the header"
        )
        await error_response(message, 400)(scope, receive, send)
