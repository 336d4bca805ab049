"""``POST /v1/chat/completions`` over the one request path: the body is read and parsed
(:mod:`.request`, :mod:`.messages`), the pictures fetched (:mod:`.fetch`), and each of the
``n`` choices (:mod:`.choices`) sent as the generation interface's inputs to
:meth:`~mmaas.server.dataplane.DataPlane.infer` / ``stream``, which check, run and account
for it like any KServe request; the answers are written as OpenAI writes them.

* Unary: ``chat.completion`` with ``n`` choices (``message.content``, ``logprobs``,
  ``finish_reason`` ``stop``/``length``) and ``usage`` (``prompt_tokens`` counts the
  pictures' tokens).
* Stream (``stream: true``): ``chat.completion.chunk`` server-sent events (per choice: the
  role first, content deltas with their logprobs, one ``finish_reason``; then the usage
  chunk with ``choices: []`` when asked, every other chunk with ``usage: null``; then
  ``data: [DONE]``). An error before the first event is a JSON error with its 4xx/5xx
  status; after it, one ``data: {"error": ...}`` event, then the stream ends.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse

from mmaas.server.dataplane import DataPlane, Failed
from mmaas.server.openai.choices import Answers, Merged, Outputs, choice_inputs, unary
from mmaas.server.openai.errors import ChatError, error_body, error_response, failure_error
from mmaas.server.openai.fetch import Fetcher
from mmaas.server.openai.request import ChatRequest, parse_chat
from mmaas.server.protocol.types import InferInput, InferRequest, InferResponse
from mmaas.server.repository import ServedModel
from mmaas.server.settings import FetchSettings
from mmaas.server.status import NotFound

GENERATION_INPUTS = ("text_input", "messages")
GENERATION_OUTPUTS = ("text_output", "output_ids", "finish_reason", "num_input_tokens")


def is_generation(model: ServedModel) -> bool:
    """True for a model with the generation interface (the qwen2-vl kind's, and any
    pipeline that serves text_input or a messages conversation -> text_output with finish
    reasons and counts)."""
    outputs = {tensor.name for tensor in model.info.outputs}
    inputs = {tensor.name for tensor in model.info.inputs}
    return inputs.issuperset(GENERATION_INPUTS) and outputs.issuperset(GENERATION_OUTPUTS)


class ChoiceExchange:
    """One choice's request as the data plane reads it; each response kept as its outputs
    (:class:`mmaas.server.dataplane.Exchange`)."""

    def __init__(self, ident: str, inputs: list[InferInput], size: int) -> None:
        self.ident, self.inputs, self.size = ident, inputs, size
        self.model = ""

    async def read(self, model: ServedModel) -> InferRequest:
        """The inputs; a model without the generation interface is NOT_FOUND."""
        if not is_generation(model):
            raise NotFound(
                f"model {model.name!r} does not generate text; GET /v1/models lists those that do"
            )
        self.model = model.name
        return InferRequest(self.ident, self.inputs, size=self.size)

    def write(self, model: ServedModel, request: InferRequest, response: InferResponse) -> Outputs:
        """The response's outputs by name."""
        return {output.name: output.data for output in response.outputs}


class ChatEndpoint:
    """The endpoint over the data plane; ``read_timeout_s`` bounds the body's arrival,
    ``fetch`` how pictures are fetched."""

    def __init__(self, plane: DataPlane, read_timeout_s: float, fetch: FetchSettings) -> None:
        self.plane, self.read_timeout_s = plane, read_timeout_s
        self.fetcher = Fetcher(fetch)

    async def handle(self, request: Request) -> Response:
        """One chat completion, unary or streamed (see the module docstring)."""
        chat = None
        try:
            body = await self._body(request)
            try:
                document = orjson.loads(body)
            except orjson.JSONDecodeError as exc:
                raise ChatError(f"the request body is not valid JSON: {exc}") from None
            chat = parse_chat(document)
            pictures = await self.fetcher.pictures(chat.pictures)
            ident = f"chatcmpl-{uuid.uuid4().hex}"
            exchanges = [ChoiceExchange(ident, inputs, len(body))
                         for inputs in choice_inputs(chat, pictures)]  # fmt: skip
            if not chat.stream:
                answers = await unary([self.plane.infer(chat.model, "", e) for e in exchanges])
                document = Answers(chat, ident, int(time.time()), exchanges[0].model)
                return _json(document.completion_document(answers))
            merged = Merged([self.plane.stream(chat.model, "", e) for e in exchanges])
            await merged.started()
        except ChatError as error:
            return error_response(error)
        except Failed as failed:
            return error_response(failure_error(failed.failure, chat))
        answer = Answers(chat, ident, int(time.time()), exchanges[0].model)
        return StreamingResponse(_events(merged, answer, chat), media_type="text/event-stream")

    async def _body(self, request: Request) -> bytes:
        """The body within the largest message limit of the served models (413 past it,
        408 when it does not arrive in time)."""
        limit = max((model.message_limit for model in self.plane.repository), default=1 << 26)
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise ChatError(_too_large(int(declared), limit), status=413)
        chunks: list[bytes] = []
        received = 0

        async def collect() -> None:
            nonlocal received
            async for chunk in request.stream():
                received += len(chunk)
                if received > limit:
                    raise ChatError(_too_large(received, limit), status=413)
                chunks.append(chunk)

        try:
            await asyncio.wait_for(collect(), self.read_timeout_s)
        except TimeoutError:
            raise ChatError(
                f"the request body did not arrive within {self.read_timeout_s:g} s "
                "(MMAAS_HTTP_READ_TIMEOUT_S): is Content-Length right?", status=408,
            ) from None  # fmt: skip
        except ClientDisconnect:
            raise ChatError("the connection ended during the request body") from None
        if request.headers.get("content-encoding", "identity").strip().lower() != "identity":
            raise ChatError("send the body without Content-Encoding", status=415)
        return b"".join(chunks)


async def _events(merged: Merged, answer: Answers, chat: ChatRequest) -> AsyncIterator[bytes]:
    """Each choice's chunks as they come, then the tail; or one error event. Closing this
    iterator (the client left) closes every choice's stream, which stops its generation."""
    started: set[int] = set()
    try:
        async with aclosing(merged.items()) as items:
            async for index, outputs in items:
                yield answer.chunk_events(index, outputs, index not in started)
                started.add(index)
        yield answer.tail_events()
    except Failed as failed:
        yield b"data: " + error_body(failure_error(failed.failure, chat)) + b"\n\n"


def _json(document: Any) -> Response:
    return Response(orjson.dumps(document), media_type="application/json")


def _too_large(size: int, limit: int) -> str:
    return (
        f"the request body is {size} bytes, over the server's limit of {limit} bytes "
        "(MMAAS_MAX_MESSAGE_SIZE)"
    )
