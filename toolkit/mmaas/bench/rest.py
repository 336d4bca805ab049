"""Closed-loop load over KServe v2 HTTP/REST (scripts/bench_runtime.py): every client
POSTs one pre-encoded ``/infer`` body (JSON tensors, which every KServe v2 server takes,
or Triton's binary tensor data) over its own keep-alive connection, so the client's cost
is the same for every server measured. Needs aiohttp (tritonclient[http] brings it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import orjson

from mmaas.bench.load import CallFailed, LevelResult, closed_loop

Body = tuple[bytes, dict[str, str]]  # (request body, headers)


def json_body(inputs: Mapping[str, np.ndarray], datatypes: Mapping[str, str]) -> Body:
    """A KServe v2 JSON ``/infer`` body with every input as flat ``data``."""
    tensors = [
        {"name": n, "datatype": datatypes[n], "shape": list(a.shape), "data": a.reshape(-1)}
        for n, a in inputs.items()
    ]
    body = orjson.dumps({"inputs": tensors}, option=orjson.OPT_SERIALIZE_NUMPY)
    return body, {"Content-Type": "application/json"}


def binary_body(inputs: Mapping[str, np.ndarray], datatypes: Mapping[str, str]) -> Body:
    """The same request with Triton's binary tensor data extension, outputs binary too."""
    tensors = [
        {
            "name": name,
            "datatype": datatypes[name],
            "shape": list(array.shape),
            "parameters": {"binary_data_size": array.nbytes},
        }
        for name, array in inputs.items()
    ]
    header = orjson.dumps({"inputs": tensors, "parameters": {"binary_data_output": True}})
    body = header + b"".join(np.ascontiguousarray(a).tobytes() for a in inputs.values())
    headers = {
        "Content-Type": "application/octet-stream",
        "Inference-Header-Content-Length": str(len(header)),
    }
    return body, headers


def measure(
    url: str,
    body_of: Callable[[int], Body],
    concurrency: Sequence[int],
    duration_s: float,
    warmup_requests: int = 10,
) -> list[LevelResult]:
    """POST ``body_of(client_index)`` to ``url`` (``http://host:port/v2/models/m/infer``)
    at each concurrency level, in order; a status other than 200 counts as an error."""
    return asyncio.run(_measure(url, body_of, concurrency, duration_s, warmup_requests))


async def _measure(
    url: str,
    body_of: Callable[[int], Body],
    concurrency: Sequence[int],
    duration_s: float,
    warmup_requests: int,
) -> list[LevelResult]:
    import aiohttp

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def call(index: int) -> None:
            body, headers = body_of(index)
            try:
                async with session.post(url, data=body, headers=headers) as reply:
                    data = await reply.read()
            except aiohttp.ClientError as exc:  # the server closed or reset the connection
                raise CallFailed(f"{type(exc).__name__}: {exc}"[:120]) from None
            if reply.status != 200:
                raise CallFailed(f"HTTP {reply.status}: {data[:120]!r}")

        for _ in range(warmup_requests):
            with contextlib.suppress(CallFailed):  # counted in the levels, not here
                await call(0)
        return [await closed_loop(call, level, duration_s) for level in concurrency]
