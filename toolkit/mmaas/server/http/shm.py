"""Triton's shared-memory extension over HTTP (``docs/protocol/extension_shared_memory.md``):
``/v2/systemsharedmemory[/region/{name}]/{status,register,unregister}`` over the server's
one registry (:class:`mmaas.server.protocol.shm.SystemSharedMemory`, shared with gRPC: a region
registered over one front end is usable over the other), and
``/v2/cudasharedmemory/...``: registration refused naming system shared memory (the CPU
back ends read inputs from host memory), status an empty list, unregister a no-op, so
that perf_analyzer's clean-up calls succeed as against Triton.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from mmaas.server.http.errors import answer, failure_response, json_response
from mmaas.server.inference import failure_of
from mmaas.server.protocol.shm import SystemSharedMemory, cuda_unsupported
from mmaas.server.status import InvalidArgument


class SharedMemoryEndpoints:
    """The endpoints over ``shm``; ``backend`` names the back ends in CUDA refusals."""

    def __init__(self, shm: SystemSharedMemory, backend: str) -> None:
        self.shm = shm
        self.backend = backend

    async def status(self, request: Request) -> Response:
        """``GET .../status``: ``[{"name", "key", "offset", "byte_size"}]``, and
        ``"pending": true`` for a region unregistered while requests in flight use it;
        404 unknown."""
        return await answer(self._status, request)

    async def register(self, request: Request) -> Response:
        """``POST .../region/{name}/register`` with ``{"key", "offset"?, "byte_size"}``."""
        return await answer(self._register, request)

    async def unregister(self, request: Request) -> Response:
        """``POST .../unregister``: that region, or every region without a name (kept
        mapped, pending, while requests in flight use it)."""
        self.shm.unregister(request.path_params.get("name", ""))
        return json_response({})

    async def cuda_status(self, request: Request) -> Response:
        """``GET /v2/cudasharedmemory[/region/{name}]/status``: nothing is registered."""
        return json_response([])

    async def cuda_register(self, request: Request) -> Response:
        """``POST /v2/cudasharedmemory/region/{name}/register``: refused, saying why."""
        exc = cuda_unsupported(request.path_params["name"], self.backend)
        return failure_response(failure_of(exc), exc)

    async def cuda_unregister(self, request: Request) -> Response:
        """``POST /v2/cudasharedmemory[/region/{name}]/unregister``: nothing to release."""
        return json_response({})

    async def _status(self, request: Request) -> Response:
        regions = self.shm.status(request.path_params.get("name", ""))
        return json_response(
            [
                {"name": r.name, "key": r.key, "offset": r.offset, "byte_size": r.byte_size}
                | ({"pending": True} if r.pending else {})
                for r in regions
            ]
        )

    async def _register(self, request: Request) -> Response:
        name = request.path_params["name"]
        document = _json_object(await request.body())
        key = document.get("key")
        if not isinstance(key, str):
            raise InvalidArgument("Shared memory register request has no 'key' field (a string)")
        if "byte_size" not in document:
            raise InvalidArgument("Shared memory register request has no 'byte_size' field")
        offset, byte_size = document.get("offset", 0), document["byte_size"]
        for field, value in (("offset", offset), ("byte_size", byte_size)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidArgument(f"'{field}' of the register request must be an integer")
        self.shm.register(name, key, offset, byte_size)
        return json_response({})


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        document = orjson.loads(body or b"{}")
    except orjson.JSONDecodeError as exc:
        raise InvalidArgument(f"the register request is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise InvalidArgument("the register request must be a JSON object")
    return document
