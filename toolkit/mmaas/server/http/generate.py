"""Triton's generate extension (``server/docs/protocol/extension_generate.md``):
``POST /v2/models/{m}[/versions/{v}]/generate`` answers one JSON object, and
``/generate_stream`` answers server-sent events, one per response of the model (every
token of a generation model), over the one request path
(:meth:`~mmaas.server.dataplane.DataPlane.infer` / ``stream``; the streaming contract of
:mod:`mmaas.server.streaming`).

Request: a JSON object; ``id`` (string) is echoed, every other top-level key and every key
of ``parameters`` names an input of the model (``text_input``, ``max_tokens``...), its
value a JSON scalar or flat array of the input's datatype, shaped ``[1, ..., 1, n]`` to the
input's rank. An unknown key is refused naming the inputs (a misspelt parameter must not
pass unnoticed).
A BYTES value may be a base64 data URL (``data:image/png;base64,...``): the input gets
the bytes it encodes (a picture for a vision-language model).
Response: ``{"id"?, "model_name", "model_version", <output>: value...}``, a one-element
output as a scalar (``"text_output": "..."``).

Stream: ``Content-Type: text/event-stream``; each event is ``data: <JSON>`` and a
blank line, as Triton's; every event carries ``"final"``, and exactly one, the last, has
``"final": true`` (mmaas's documented end marker: Triton has none). A failure before the
first response is a plain JSON error with its 4xx/5xx status, not a stream; a failure
after it is one last event ``{"error": "...", "final": true}``, then the stream closes.
When the client leaves, the model's iterator is closed (it stops within one step).
"""

from __future__ import annotations

import base64
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from mmaas.server.dataplane import DataPlane, Failed
from mmaas.server.http.body import read_body
from mmaas.server.http.errors import JSON, failure_response
from mmaas.server.protocol.codec import to_values
from mmaas.server.protocol.types import InferInput, InferRequest, InferResponse, Values
from mmaas.server.repository import ServedModel
from mmaas.server.signature import describe
from mmaas.server.status import InvalidArgument

EVENT_STREAM = "text/event-stream"


class GenerateExchange:
    """A generate request's body as the data plane reads it, and each response as a JSON
    document (:class:`mmaas.server.dataplane.Exchange`); ``read_timeout_s`` bounds the
    body."""

    def __init__(self, request: Request, read_timeout_s: float) -> None:
        self.request = request
        self.read_timeout_s = read_timeout_s

    async def read(self, model: ServedModel) -> InferRequest:
        """The request: each key names an input of ``model`` (see the module docstring).

        Raises:
            HttpError: the body itself (size, time, encoding). InvalidArgument: not a JSON
                object, an ``id`` that is not a string, a key that names no input.
        """
        data = await read_body(self.request, model, self.read_timeout_s)
        document = _request_object(data)
        request_id = document.pop("id", "")
        if not isinstance(request_id, str):
            raise InvalidArgument(f"id must be a string, got {request_id!r}")
        return InferRequest(id=request_id, inputs=_inputs(model, document), size=len(data))

    def write(self, model: ServedModel, request: InferRequest, response: InferResponse) -> dict:
        """``{"id"?, "model_name", "model_version", <output>: value...}``.

        Raises:
            InvalidArgument: a BYTES output that is not UTF-8.
        """
        document: dict[str, Any] = {
            "model_name": response.model_name,
            "model_version": response.model_version,
        }
        if response.id:
            document["id"] = response.id
        for output in response.outputs:
            assert output.data is not None  # no shared memory outputs in a generate request
            values = to_values(output.name, output.data)
            document[output.name] = values[0] if len(values) == 1 else values
        return document


class EventExchange(GenerateExchange):
    """As :class:`GenerateExchange`, each response written as one server-sent event."""

    def write(self, model: ServedModel, request: InferRequest, response: InferResponse) -> Any:
        """``data: <JSON>`` and a blank line, the JSON with ``"final"``."""
        document = super().write(model, request, response)
        document["final"] = response.final
        return b"data: " + orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n\n"


class GenerateEndpoints:
    """``/generate`` and ``/generate_stream`` over the data plane."""

    def __init__(self, plane: DataPlane, read_timeout_s: float) -> None:
        self.plane = plane
        self.read_timeout_s = read_timeout_s

    async def generate(self, request: Request) -> Response:
        """One JSON answer: the model's whole response (a decoupled model's joined one)."""
        params = request.path_params
        exchange = GenerateExchange(request, self.read_timeout_s)
        try:
            document = await self.plane.infer(params["model"], params.get("version", ""), exchange)
        except Failed as failed:
            return failure_response(failed.failure, failed.cause)
        return Response(orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY), media_type=JSON)

    async def generate_stream(self, request: Request) -> Response:
        """Server-sent events, one per response (see the module docstring)."""
        params = request.path_params
        exchange = EventExchange(request, self.read_timeout_s)
        events = self.plane.stream(params["model"], params.get("version", ""), exchange)
        try:
            first = await anext(events)
        except Failed as failed:
            return failure_response(failed.failure, failed.cause)
        return StreamingResponse(_events(first, events), media_type=EVENT_STREAM)


async def _events(first: bytes, events: AsyncGenerator[bytes, None]) -> AsyncIterator[bytes]:
    """The first event, the others, or one last error event; closing this iterator (the
    client left) closes the data plane's stream, which stops the model."""
    try:
        yield first
        async for event in events:
            yield event
    except Failed as failed:
        yield b"data: " + orjson.dumps({"error": failed.failure.message, "final": True}) + b"\n\n"
    finally:
        await events.aclose()


def _inputs(model: ServedModel, document: dict[str, Any]) -> list[InferInput]:
    parameters = document.pop("parameters", {}) or {}
    if not isinstance(parameters, dict):
        raise InvalidArgument("parameters must be a JSON object")
    declared = {tensor.name: tensor for tensor in model.info.inputs}
    inputs = []
    for name, value in [*document.items(), *parameters.items()]:
        tensor = declared.get(name)
        if tensor is None:
            raise InvalidArgument(
                f"unknown input {name!r} in the generate request; model {model.name!r} "
                f"takes {', '.join(describe(t) for t in model.info.inputs)}"
            )
        values = value if isinstance(value, list) else [value]
        if tensor.datatype == "BYTES":
            values = [_decoded(name, index, v) for index, v in enumerate(values)]
        shape = (*[1] * (len(tensor.shape) - 1), len(values))
        inputs.append(InferInput(name, tensor.datatype, shape, Values(values)))
    return inputs


def _decoded(name: str, index: int, value: object) -> object:
    """A BYTES string that is a base64 data URL (``data:image/png;base64,...``, as
    OpenAI-style clients send pictures) becomes the bytes it encodes, since JSON strings
    cannot carry binary data (the scheme and ``base64`` in any case: RFC 3986 section
    3.1); any other value is left to the codec."""
    head = value[:200].lower() if isinstance(value, str) else ""
    marker = head.find(";base64,")
    if not (isinstance(value, str) and head.startswith("data:") and marker >= 0):
        return value
    try:
        return base64.b64decode(value[marker + len(";base64,") :], validate=True)
    except ValueError:
        raise InvalidArgument(
            f"input {name!r} element {index}: the data URL does not hold valid base64"
        ) from None


def _request_object(data: bytes) -> dict[str, Any]:
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InvalidArgument(f"the request body is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise InvalidArgument(
            'the generate request must be a JSON object, e.g. {"text_input": ...}'
        )
    return document
