"""Reading a request body: within the server's message limit (413 before anything past
the limit is read), within ``MMAAS_HTTP_READ_TIMEOUT_S`` (408 instead of a request that
hangs on a ``Content-Length`` its client never sends), decompressed when the client sent
``Content-Encoding: gzip`` or ``deflate`` (tritonclient's ``request_compression_algorithm``;
Triton honours both)."""

from __future__ import annotations

import asyncio
import zlib

from starlette.requests import ClientDisconnect, Request

from mmaas.server.http.errors import HttpError
from mmaas.server.inference import check_size
from mmaas.server.repository import ServedModel
from mmaas.server.status import RequestError, ResourceExhausted

WINDOW_BITS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class ClientGone(RequestError):
    """The client closed the connection before its request body arrived."""

    status = "CANCELLED"


async def read_body(request: Request, model: ServedModel, timeout_s: float) -> bytes:
    """The whole (decompressed) body of ``request`` for ``model`` (its message limit).

    Raises:
        HttpError: 413 over the message limit (``Content-Length`` or bytes received),
            408 when it does not arrive in ``timeout_s``, 415 for an unknown encoding,
            400 for a body that does not decompress.
        ClientGone: the client went away.
    """
    declared = request.headers.get("content-length", "")
    if declared.isdigit():
        _check_size(model, int(declared))
    chunks: list[bytes] = []
    received = 0

    async def collect() -> None:
        nonlocal received
        async for chunk in request.stream():
            received += len(chunk)
            _check_size(model, received)
            chunks.append(chunk)

    try:
        await asyncio.wait_for(collect(), timeout_s)
    except TimeoutError:
        expected = f" of {declared}" if declared else ""
        raise HttpError(
            408,
            f"the request body did not arrive within {timeout_s:g} s ({received}{expected} "
            "bytes received; MMAAS_HTTP_READ_TIMEOUT_S): is Content-Length right?",
        ) from None
    except ClientDisconnect:
        raise ClientGone(
            "the connection ended during the request body (the client closed it, or its "
            "chunked encoding is malformed)"
        ) from None
    body = b"".join(chunks)
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding == "identity":
        return body
    return _decompress(body, encoding, model)


def _check_size(model: ServedModel, size: int) -> None:
    try:
        check_size(model, "request", size)
    except ResourceExhausted as exc:
        raise HttpError(413, exc.message, "RESOURCE_EXHAUSTED") from None


def _decompress(body: bytes, encoding: str, model: ServedModel) -> bytes:
    if encoding not in WINDOW_BITS:
        raise HttpError(
            415, f"Content-Encoding {encoding!r} is not supported; send gzip, deflate or none"
        )
    inflater = zlib.decompressobj(WINDOW_BITS[encoding])
    limit = model.message_limit
    try:
        data = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise HttpError(400, f"the request body is not valid {encoding} data: {exc}") from None
    _check_size(model, len(data))
    if not inflater.eof:
        raise HttpError(400, f"the request body ends inside its {encoding} stream")
    return data
