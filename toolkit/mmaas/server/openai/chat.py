"""``POST /v1/chat/completions`` over the one request path: the body is read and parsed
(:mod:`.request`) into the generation interface's inputs, which
:meth:`~mmaas.server.dataplane.DataPlane.infer` / ``stream`` check, run and account for
like any KServe request; each response is written as OpenAI writes it.

* Unary: ``chat.completion`` with one choice (``message.content``, ``finish_reason``
  ``stop``/``length``) and ``usage`` (``prompt_tokens`` counts the pictures' tokens).
* Stream (``stream: true``): ``chat.completion.chunk`` server-sent events: the role
  first (``delta: {"role": "assistant", "content": ""}``), then content deltas (text that
  could begin a stop string is held back), one ``finish_reason``, then with
  ``stream_options.include_usage`` a usage chunk with ``choices: []`` (every other chunk
  has ``usage: null``), then ``data: [DONE]``. An error before the first event is a JSON
  error with its 4xx/5xx status; after it, one ``data: {"error": ...}`` event, then the
  stream ends.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse

from mmaas.server.dataplane import DataPlane, Failed
from mmaas.server.openai.errors import error_body, error_response, failure_error
from mmaas.server.openai.request import ChatError, ChatRequest, parse_chat
from mmaas.server.protocol.types import InferRequest, InferResponse
from mmaas.server.repository import ServedModel
from mmaas.server.status import NotFound

GENERATION_OUTPUTS = ("text_output", "output_ids", "finish_reason", "num_input_tokens")


def is_generation(model: ServedModel) -> bool:
    """True for a model with the generation interface (the qwen2-vl kind's, and any
    pipeline that serves text_input -> text_output with finish reasons and counts)."""
    outputs = {tensor.name for tensor in model.info.outputs}
    inputs = {tensor.name for tensor in model.info.inputs}
    return "text_input" in inputs and outputs.issuperset(GENERATION_OUTPUTS)


class ChatExchange:
    """One chat request as the data plane reads it, each response as OpenAI's JSON
    (:class:`mmaas.server.dataplane.Exchange`)."""

    def __init__(self, chat: ChatRequest, size: int) -> None:
        self.chat, self.size = chat, size
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.tokens = 0  # completion tokens so far

    async def read(self, model: ServedModel) -> InferRequest:
        """The parsed inputs; a model without the generation interface is NOT_FOUND."""
        if not is_generation(model):
            raise NotFound(
                f"model {model.name!r} does not generate text; GET /v1/models lists those that do"
            )
        return InferRequest(self.id, self.chat.inputs, size=self.size)

    def write(self, model: ServedModel, request: InferRequest, response: InferResponse) -> Any:
        """``chat.completion`` (see the module docstring)."""
        out = _outputs(response)
        prompt, completion = int(out["num_input_tokens"][0]), len(out["output_ids"])
        message = {"role": "assistant", "content": out["text_output"][0].decode()}
        return {
            "id": self.id, "object": "chat.completion", "created": self.created,
            "model": model.name, "system_fingerprint": None,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": out["finish_reason"][0].decode()}],
            "usage": _usage(prompt, completion),
        }  # fmt: skip


class ChunkExchange(ChatExchange):
    """As :class:`ChatExchange`, each response written as server-sent events."""

    def write(self, model: ServedModel, request: InferRequest, response: InferResponse) -> Any:
        """The chunks of one response (the role chunk before the first)."""
        out = _outputs(response)
        events = [] if self.tokens else [self._chunk(model, {"role": "assistant", "content": ""})]
        self.tokens += len(out["output_ids"])
        text = out["text_output"][0].decode()
        reason = out["finish_reason"][0].decode() or None
        if text or reason:
            events.append(self._chunk(model, {"content": text} if text else {}, reason))
        if reason and self.chat.include_usage:
            usage = _usage(int(out["num_input_tokens"][0]), self.tokens)
            events.append(self._event(model, [], usage))
        if reason:
            events.append(b"data: [DONE]\n\n")
        return b"".join(events)

    def _chunk(self, model: ServedModel, delta: dict, reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}
        return self._event(model, [choice], None)

    def _event(self, model: ServedModel, choices: list, usage: dict | None) -> bytes:
        document: dict[str, Any] = {
            "id": self.id, "object": "chat.completion.chunk", "created": self.created,
            "model": model.name, "system_fingerprint": None, "choices": choices,
        }  # fmt: skip
        if self.chat.include_usage:
            document["usage"] = usage
        return b"data: " + orjson.dumps(document) + b"\n\n"


class ChatEndpoint:
    """The endpoint over the data plane; ``read_timeout_s`` bounds the body's arrival."""

    def __init__(self, plane: DataPlane, read_timeout_s: float) -> None:
        self.plane, self.read_timeout_s = plane, read_timeout_s

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
            if not chat.stream:
                answer = await self.plane.infer(chat.model, "", ChatExchange(chat, len(body)))
                return Response(orjson.dumps(answer), media_type="application/json")
            events = self.plane.stream(chat.model, "", ChunkExchange(chat, len(body)))
            first = await anext(events)
        except ChatError as error:
            return error_response(error)
        except Failed as failed:
            return error_response(failure_error(failed.failure, chat))
        return StreamingResponse(_events(first, events, chat), media_type="text/event-stream")

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


async def _events(
    first: bytes, events: AsyncGenerator[bytes, None], chat: ChatRequest
) -> AsyncIterator[bytes]:
    """The first events, the others, or one error event; closing this iterator (the client
    left) closes the data plane's stream, which stops the generation."""
    try:
        yield first
        async for event in events:
            yield event
    except Failed as failed:
        yield b"data: " + error_body(failure_error(failed.failure, chat)) + b"\n\n"
    finally:
        await events.aclose()


def _outputs(response: InferResponse) -> dict[str, Any]:
    return {output.name: output.data for output in response.outputs}


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}  # fmt: skip


def _too_large(size: int, limit: int) -> str:
    return (
        f"the request body is {size} bytes, over the server's limit of {limit} bytes "
        "(MMAAS_MAX_MESSAGE_SIZE)"
    )
