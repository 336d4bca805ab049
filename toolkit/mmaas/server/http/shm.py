"""Triton's shared-memory extension over HTTP (``docs/protocol/extension_shared_memory.md``):
``/v2/systemsharedmemory[/region/{name}]/{status,register,unregister}`` and
``/v2/cudasharedmemory[/region/{name}]/{status,register,unregister}`` over the server's
registries (:class:`mmaas.server.protocol.memory.SharedMemory`, shared with gRPC: a
region registered over one front end is usable over the other). A CUDA region is
registered by its CUDA IPC handle, ``{"raw_handle": {"b64": ...}, "device_id",
"byte_size"}``; where CUDA cannot be used the registration is refused naming why, while
status (an empty list) and unregister succeed, as perf_analyzer's clean-up calls need.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from mmaas.server.http.errors import answer, json_response
from mmaas.server.protocol.memory import SharedMemory
from mmaas.server.status import InvalidArgument

U64_MAX = 2**64 - 1  # offset and byte_size are uint64 in Triton's protocol


class SharedMemoryEndpoints:
    """The endpoints over ``shm`` (both kinds of region)."""

    def __init__(self, shm: SharedMemory) -> None:
        self.shm = shm

    async def status(self, request: Request) -> Response:
        """``GET .../status``: ``[{"name", "key", "offset", "byte_size"}]``, and
        ``"pending": true`` for a region unregistered while requests in flight use it;
        404 unknown."""
        return await answer(self._status, request)

    async def register(self, request: Request) -> Response:
        """``POST .../region/{name}/register`` with ``{"key", "offset"?, "byte_size"}``."""
        return await answer(self._register, request)

    async def unregister(self, request: Request) -> Response:
        """``POST .../unregister``: that region, or every system region without a name
        (kept mapped, pending, while requests in flight use it)."""
        self.shm.system.unregister(request.path_params.get("name", ""))
        return json_response({})

    async def cuda_status(self, request: Request) -> Response:
        """``GET /v2/cudasharedmemory[/region/{name}]/status``:
        ``[{"name", "device_id", "byte_size"}]`` (``"pending": true`` as for system
        regions); 404 unknown."""
        return await answer(self._cuda_status, request)

    async def cuda_register(self, request: Request) -> Response:
        """``POST /v2/cudasharedmemory/region/{name}/register`` with
        ``{"raw_handle": {"b64"}, "device_id", "byte_size"}``."""
        return await answer(self._cuda_register, request)

    async def cuda_unregister(self, request: Request) -> Response:
        """``POST /v2/cudasharedmemory[/region/{name}]/unregister``: that region, or every
        CUDA region without a name."""
        self.shm.cuda.unregister(request.path_params.get("name", ""))
        return json_response({})

    async def _status(self, request: Request) -> Response:
        regions = self.shm.system.status(request.path_params.get("name", ""))
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
        offset = _integer(document, "offset", 0)
        self.shm.register_system(name, key, offset, _integer(document, "byte_size"))
        return json_response({})

    async def _cuda_status(self, request: Request) -> Response:
        regions = self.shm.cuda.status(request.path_params.get("name", ""))
        return json_response(
            [
                {"name": r.name, "device_id": r.device_id, "byte_size": r.byte_size}
                | ({"pending": True} if r.pending else {})
                for r in regions
            ]
        )

    async def _cuda_register(self, request: Request) -> Response:
        name = request.path_params["name"]
        self.shm.cuda.check_usable(name)
        document = _json_object(await request.body())
        handle = document.get("raw_handle")
        encoded = handle.get("b64") if isinstance(handle, dict) else None
        if not isinstance(encoded, str):
            raise InvalidArgument(
                "CUDA shared memory register request has no 'raw_handle': {'b64': ...} "
                "(the base64 of the cudaIpcMemHandle_t)"
            )
        try:
            raw = base64.b64decode(encoded, validate=True)
        except binascii.Error as exc:
            raise InvalidArgument(f"'raw_handle.b64' is not base64: {exc}") from None
        device = _integer(document, "device_id")
        self.shm.register_cuda(name, raw, device, _integer(document, "byte_size"))
        return json_response({})


def _integer(document: dict[str, Any], field: str, default: int | None = None) -> int:
    """The register request's integer ``field`` (required when ``default`` is None), at
    most 2^64-1 (Triton's and gRPC's ``uint64``; a negative one is left to the register,
    which names it).

    Raises:
        InvalidArgument: absent and required, not an integer, or beyond 64 bits (orjson
            reads an integer literal beyond 64 bits as a float, so a float beyond them is
            out of range whichever way it was written).
    """
    if field not in document and default is None:
        raise InvalidArgument(f"Shared memory register request has no {field!r} field")
    value = document.get(field, default)
    if isinstance(value, int | float) and not -(2**63) <= value <= U64_MAX:
        raise InvalidArgument(
            f"{field!r} of the register request is out of range: {value!r:.30} is not "
            f"in 0..{U64_MAX} (an unsigned 64-bit integer)"
        )
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{field!r} of the register request must be an integer")
    return value


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        document = orjson.loads(body or b"{}")
    except orjson.JSONDecodeError as exc:
        raise InvalidArgument(f"the register request is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise InvalidArgument("the register request must be a JSON object")
    return document
