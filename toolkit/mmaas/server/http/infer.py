"""``POST /v2/models/{m}[/versions/{v}]/infer``: KServe v2 REST inference with JSON
tensors and Triton's binary tensor data extension, over the one request path
(:class:`~mmaas.server.dataplane.DataPlane`: the same lookup, signature checks, codec,
limits, scheduler, batching and statistics as gRPC's ModelInfer).

Order: read the body (limit, timeout, encoding), parse it into the neutral request
(:mod:`.request`), then the data plane checks, decodes and runs it; the response is
encoded by :mod:`.response`. A response with a binary output is
``application/octet-stream`` with ``Inference-Header-Content-Length``; else
``application/json``.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from mmaas.server.dataplane import DataPlane, Failed
from mmaas.server.http.binary_header import HEADER, header_length
from mmaas.server.http.body import read_body
from mmaas.server.http.errors import JSON, failure_response
from mmaas.server.http.request import parse_body, raw_body
from mmaas.server.http.response import encode_response
from mmaas.server.protocol.types import InferRequest, InferResponse
from mmaas.server.repository import ServedModel


class BodyExchange:
    """One ``/infer`` request's body as the data plane reads it, and its response
    (:class:`mmaas.server.dataplane.Exchange`); ``read_timeout_s`` bounds the body."""

    def __init__(self, request: Request, read_timeout_s: float) -> None:
        self.request = request
        self.read_timeout_s = read_timeout_s

    async def read(self, model: ServedModel) -> InferRequest:
        """The body within ``model``'s message limit, parsed (a raw binary body takes its
        shape from ``model``'s one input).

        Raises:
            HttpError: 413, 408, 415 or 400 for the body itself (:func:`.body.read_body`).
            InvalidArgument: a malformed JSON header or binary part.
        """
        data = await read_body(self.request, model, self.read_timeout_s)
        json_length = header_length(self.request.headers.getlist(HEADER), len(data))
        return raw_body(model.info, data) if json_length == 0 else parse_body(data, json_length)

    def write(self, model: ServedModel, request: InferRequest, response: InferResponse) -> Response:
        """The HTTP response: JSON, or binary outputs after the JSON header."""
        content, json_size = encode_response(request, response)
        if json_size is None:
            return Response(content, media_type=JSON)
        return Response(
            content, media_type="application/octet-stream", headers={HEADER: str(json_size)}
        )


class InferEndpoint:
    """The infer endpoint over the data plane; ``read_timeout_s`` bounds the body."""

    def __init__(self, plane: DataPlane, read_timeout_s: float) -> None:
        self.plane = plane
        self.read_timeout_s = read_timeout_s

    async def handle(self, request: Request) -> Response:
        """Answer one ``/infer`` request (errors as KServe ``{"error"}`` bodies)."""
        params = request.path_params
        exchange = BodyExchange(request, self.read_timeout_s)
        try:
            return await self.plane.infer(params["model"], params.get("version", ""), exchange)
        except Failed as failed:
            return failure_response(failed.failure, failed.cause)
