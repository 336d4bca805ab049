"""Triton's generate extension (``server/docs/protocol/extension_generate.md``):
``POST /v2/models/{m}[/versions/{v}]/generate`` answers one JSON object, and
``/generate_stream`` answers server-sent events, one per response of the model (every
token of a generation model), over the one request path
(:meth:`~mmaas.server.inference.InferencePath.run` / ``stream``; the streaming contract of
:mod:`mmaas.server.streaming`).

Request: a JSON object; ``id`` (string) is echoed, every other top-level key and every key
of ``parameters`` names an input of the model (``text_input``, ``max_tokens``...), its
value a JSON scalar or flat array of the input's datatype, shaped ``[1, ..., 1, n]`` to the
input's rank. An unknown key is refused naming the inputs (C30: a misspelt parameter).
A BYTES value may be a base64 data URL (``data:image/png;base64,...``): the input gets
the bytes it encodes (a picture for a vision-language model).
Response: ``{"id"?, "model_name", "model_version", <output>: value...}``, a one-element
output as a scalar (``"text_output": "..."``).

Stream (C25): ``Content-Type: text/event-stream``; each event is ``data: <JSON>`` and a
blank line, as Triton's; every event carries ``"final"``, and exactly one, the last, has
``"final": true`` (mmaas's documented end marker: Triton has none). A failure before the
first response is a plain JSON error with its 4xx/5xx status, not a stream; a failure
after it is one last event ``{"error": "...", "final": true}``, then the stream closes.
When the client leaves, the model's iterator is closed (it stops within one step).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

import numpy as np
import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from mmaas.server.http.body import read_body
from mmaas.server.http.errors import JSON, failure_response
from mmaas.server.http.request import InputTensor
from mmaas.server.http.tensors import from_json, json_data, output_datatype
from mmaas.server.inference import InferencePath, Outcome, failure_of
from mmaas.server.repository import ServedModel
from mmaas.server.signature import describe
from mmaas.server.status import InvalidArgument, RequestError
from mmaas.server.streaming import Response as ModelResponse

EVENT_STREAM = "text/event-stream"


class GenerateEndpoints:
    """``/generate`` and ``/generate_stream`` over one request path."""

    def __init__(self, path: InferencePath, read_timeout_s: float) -> None:
        self.path = path
        self.read_timeout_s = read_timeout_s

    async def generate(self, request: Request) -> Response:
        """One JSON answer: the model's whole response (a decoupled model's joined one)."""
        try:
            model = self._lookup(request)
        except RequestError as exc:  # an unknown model has no statistics to count it in
            return failure_response(failure_of(exc), exc)
        async with self.path.accounted(model, "") as outcome:
            try:
                arrays, names, request_id = await self._admit(request, model, outcome)
                results = await self.path.run(model, arrays, names, None)
                return _json(_document(model, request_id, results))
            except Exception as exc:
                return failure_response(outcome.failed(exc), exc)

    async def generate_stream(self, request: Request) -> Response:
        """Server-sent events, one per response (see the module docstring)."""
        try:
            model = self._lookup(request)
        except RequestError as exc:  # an unknown model has no statistics to count it in
            return failure_response(failure_of(exc), exc)
        stack = contextlib.AsyncExitStack()
        outcome = await stack.enter_async_context(self.path.accounted(model, ""))
        try:
            arrays, names, request_id = await self._admit(request, model, outcome)
            responses = self.path.stream(model, arrays, names, None)
            first = await anext(responses)
        except Exception as exc:
            failure = outcome.failed(exc)
            await stack.aclose()
            return failure_response(failure, exc)
        events = _events(model, request_id, first, responses, outcome, stack)
        return StreamingResponse(events, media_type=EVENT_STREAM)

    def _lookup(self, request: Request) -> ServedModel:
        params = request.path_params
        return self.path.lookup(params["model"], params.get("version", ""))

    async def _admit(
        self, request: Request, model: ServedModel, outcome: Outcome
    ) -> tuple[dict[str, np.ndarray], list[str], str]:
        data = await read_body(request, model, self.read_timeout_s)
        document = _request_object(data)
        request_id = document.pop("id", "")
        if not isinstance(request_id, str):
            raise InvalidArgument(f"id must be a string, got {request_id!r}")
        outcome.request_id = request_id
        tensors = _tensors(model, document)
        headers = [(t.name, t.datatype, t.shape) for t in tensors]
        names = self.path.admit(model, len(data), headers, [])
        return {t.name: _array(t) for t in tensors}, names, request_id


async def _events(
    model: ServedModel,
    request_id: str,
    first: ModelResponse,
    responses: AsyncIterator[ModelResponse],
    outcome: Outcome,
    stack: contextlib.AsyncExitStack,
) -> AsyncIterator[bytes]:
    try:
        yield _event(model, request_id, first)
        if not first.final:
            async for response in responses:
                yield _event(model, request_id, response)
    except (asyncio.CancelledError, GeneratorExit):
        outcome.reason = "CANCELED"  # the client left: counted as Triton counts it
        raise
    except Exception as exc:
        failure = outcome.failed(exc)
        yield b"data: " + orjson.dumps({"error": failure.message, "final": True}) + b"\n\n"
    finally:
        await responses.aclose()  # type: ignore[attr-defined]
        await stack.aclose()


def _event(model: ServedModel, request_id: str, response: ModelResponse) -> bytes:
    document = _document(model, request_id, response.outputs)
    document["final"] = response.final
    return b"data: " + orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n\n"


def _document(model: ServedModel, request_id: str, outputs: Mapping[str, np.ndarray]) -> dict:
    document: dict[str, Any] = {"model_name": model.name, "model_version": model.version}
    if request_id:
        document["id"] = request_id
    declared = {tensor.name: tensor.datatype for tensor in model.info.outputs}
    for name, array in outputs.items():
        values = json_data(name, output_datatype(declared.get(name), array), array)
        document[name] = values[0] if len(values) == 1 else values
    return document


def _tensors(model: ServedModel, document: dict[str, Any]) -> list[InputTensor]:
    parameters = document.pop("parameters", {}) or {}
    if not isinstance(parameters, dict):
        raise InvalidArgument("parameters must be a JSON object")
    declared = {tensor.name: tensor for tensor in model.info.inputs}
    tensors = []
    for name, value in [*document.items(), *parameters.items()]:
        tensor = declared.get(name)
        if tensor is None:
            raise InvalidArgument(
                f"unknown input {name!r} in the generate request; model {model.name!r} "
                f"takes {', '.join(describe(t) for t in model.info.inputs)}"
            )
        values = value if isinstance(value, list) else [value]
        shape = (*[1] * (len(tensor.shape) - 1), len(values))
        tensors.append(InputTensor(name, tensor.datatype, shape, {}, values))
    return tensors


def _array(tensor: InputTensor) -> np.ndarray:
    """The input's array; a BYTES string that is a base64 data URL
    (``data:image/png;base64,...``, as OpenAI-style clients send pictures) becomes the
    bytes it encodes, since JSON strings cannot carry binary data."""
    if tensor.datatype != "BYTES" or not any(_is_data_url(v) for v in tensor.data):
        return from_json(tensor)
    elements = []
    for index, value in enumerate(tensor.data):
        if not isinstance(value, str):
            raise InvalidArgument(
                f"input {tensor.name!r}: data holds {value!r:.20}, BYTES takes strings"
            )
        elements.append(
            _decoded(tensor.name, index, value) if _is_data_url(value) else value.encode()
        )
    array = np.empty(len(elements), dtype=object)
    array[:] = elements
    return array.reshape(tensor.shape)


def _is_data_url(value: object) -> bool:
    return isinstance(value, str) and value.startswith("data:") and ";base64," in value[:200]


def _decoded(name: str, index: int, url: str) -> bytes:
    try:
        return base64.b64decode(url.split(";base64,", 1)[1], validate=True)
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


def _json(document: dict[str, Any]) -> Response:
    return Response(orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY), media_type=JSON)
