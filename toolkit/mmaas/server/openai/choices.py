"""A chat request's ``n`` choices, each a generation of its own on the request path, and
their answers in OpenAI's shapes.

**Choices.** Choice ``i`` (0..n-1) is one request to the data plane with the same inputs
(the pictures fetched once), its own sequence and sampler, and its own seed: with a
``seed`` given, choice ``i`` samples with ``(seed + i) mod 2^31`` (vLLM's rule; choice 0
is exactly a single-choice request with that seed); without one, each draws fresh entropy.
Greedy choices (temperature 0) are therefore all the same answer. Each is counted in the
model's statistics as a request. The first failure before any event fails the whole
request (its status); a failure after the stream began is one error event, and the other
choices stop.

**Unary** (``chat.completion``): ``choices[i]`` = ``{"index": i, "message": {"role":
"assistant", "content"}, "logprobs", "finish_reason"}``; ``usage.prompt_tokens`` is the
prompt's (counted once: every choice has the same prompt), ``completion_tokens`` the sum
over the choices.

**Stream** (``chat.completion.chunk`` events, interleaved as the tokens come): per index,
first ``delta: {"role": "assistant", "content": ""}``, then content deltas, then exactly
one chunk with its ``finish_reason``; after every index has finished, the usage chunk
(``choices: []``, with ``include_usage``), then ``data: [DONE]``. A chunk also carries the
``logprobs`` of the tokens it was sent with (``{"content": [...]}``); text held back
while it could begin a stop string goes out with a later chunk.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from typing import Any

import orjson

from mmaas.server.dataplane import Failed
from mmaas.server.openai.request import ChatRequest
from mmaas.server.protocol.types import InferInput, Values

Outputs = dict[str, Any]  # one response's outputs by name
SEEDS = 2**31


def choice_inputs(chat: ChatRequest, pictures: Sequence[bytes]) -> list[list[InferInput]]:
    """Each choice's inputs: the request's, the pictures, the choice's seed."""
    base = [i for i in chat.inputs if i.name != "seed"]
    if pictures:
        base.append(InferInput("image", "BYTES", (len(pictures),), Values(list(pictures))))
    out = []
    for index in range(chat.n):
        inputs = list(base)
        if chat.seed is not None:
            seed = chat.seed if index == 0 else (chat.seed + index) % SEEDS
            inputs.append(InferInput("seed", "INT32", (1,), Values([seed])))
        out.append(inputs)
    return out


class Answers:
    """The documents of one request's answer: its id, creation time and model."""

    def __init__(self, chat: ChatRequest, ident: str, created: int, model: str) -> None:
        self.chat = chat
        self.head = {"id": ident, "object": "chat.completion", "created": created,
                     "model": model, "system_fingerprint": None}  # fmt: skip
        self.prompt = 0
        self.completion = [0] * chat.n  # generated tokens per choice

    def completion_document(self, answers: Sequence[Outputs]) -> dict[str, Any]:
        """The unary ``chat.completion`` of every choice's outputs."""
        choices = []
        for index, out in enumerate(answers):
            self._count(index, out)
            message = {"role": "assistant", "content": out["text_output"][0].decode()}
            choices.append({"index": index, "message": message, "logprobs": self._logprobs(out),
                            "finish_reason": out["finish_reason"][0].decode()})  # fmt: skip
        return {**self.head, "choices": choices, "usage": self.usage()}

    def chunk_events(self, index: int, out: Outputs, first: bool) -> bytes:
        """The events of one streamed response of choice ``index`` (its role chunk before
        its first)."""
        self._count(index, out)
        events = (
            [self._event([self._delta(index, {"role": "assistant", "content": ""})])]
            if first
            else []
        )
        text = out["text_output"][0].decode()
        reason = out["finish_reason"][0].decode() or None
        logprobs = self._logprobs(out)
        if text or reason or (logprobs and logprobs["content"]):
            delta = {"content": text} if text else {}
            events.append(self._event([self._delta(index, delta, reason, logprobs)]))
        return b"".join(events)

    def tail_events(self) -> bytes:
        """After every choice finished: the usage chunk (when asked) and ``[DONE]``."""
        usage = self._event([], self.usage()) if self.chat.include_usage else b""
        return usage + b"data: [DONE]\n\n"

    def usage(self) -> dict[str, int]:
        """``usage``: the prompt once, the completions summed."""
        completion = sum(self.completion)
        return {"prompt_tokens": self.prompt, "completion_tokens": completion,
                "total_tokens": self.prompt + completion}  # fmt: skip

    def _count(self, index: int, out: Outputs) -> None:
        self.prompt = int(out["num_input_tokens"][0])
        self.completion[index] += len(out["output_ids"])

    def _logprobs(self, out: Outputs) -> dict[str, Any] | None:
        """``{"content": [...], "refusal": None}`` when asked (each entry the runtime's
        JSON, spliced in as it is), else None."""
        if not self.chat.logprobs:
            return None
        return {"content": [orjson.Fragment(entry) for entry in out["output_logprobs"]],
                "refusal": None}  # fmt: skip

    def _delta(self, index: int, delta: dict, reason: str | None = None,
               logprobs: dict | None = None) -> dict[str, Any]:  # fmt: skip
        return {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": reason}

    def _event(self, choices: list, usage: dict | None = None) -> bytes:
        document: dict[str, Any] = {**self.head, "object": "chat.completion.chunk",
                                    "choices": choices}  # fmt: skip
        if self.chat.include_usage:
            document["usage"] = usage
        return b"data: " + orjson.dumps(document) + b"\n\n"


async def unary(calls: Sequence[Any]) -> list[Outputs]:
    """Every choice's answer (``calls``: the data plane's ``infer`` awaitables); the first
    failure cancels the others and is raised."""
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for task in tasks:
            task.cancel()


class Merged:
    """The responses of every choice's stream (the data plane's ``stream`` generators), as
    they come, each iterated by a task of its own (so a generator is only ever iterated by
    one task)."""

    def __init__(self, streams: Sequence[AsyncGenerator[Outputs, None]]) -> None:
        self.streams = streams
        self.queue: asyncio.Queue[tuple[int, Outputs | BaseException | None]] = asyncio.Queue()
        self.tasks = [asyncio.ensure_future(self._pump(i, s)) for i, s in enumerate(streams)]
        self.held: list[tuple[int, Outputs | BaseException | None]] = []

    async def started(self) -> None:
        """Wait for every choice's first response.

        Raises:
            Failed: a choice failed before its first response (the streams are closed).
        """
        waiting = set(range(len(self.streams)))
        while waiting:
            index, item = await self.queue.get()
            if isinstance(item, BaseException):
                await self.close()
                raise item
            self.held.append((index, item))
            waiting.discard(index)

    async def items(self) -> AsyncGenerator[tuple[int, Outputs], None]:
        """(choice, outputs) until every stream ended.

        Raises:
            Failed: a choice failed (the other streams are closed).
        """
        ended = 0
        try:
            while ended < len(self.streams):
                index, item = self.held.pop(0) if self.held else await self.queue.get()
                if isinstance(item, BaseException):
                    raise item
                if item is None:
                    ended += 1
                else:
                    yield index, item
        finally:
            await self.close()

    async def close(self) -> None:
        """Stop every choice: its task, then its stream (the request is cancelled)."""
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for stream in self.streams:
            await stream.aclose()

    async def _pump(self, index: int, stream: AsyncGenerator[Outputs, None]) -> None:
        try:
            async for outputs in stream:
                await self.queue.put((index, outputs))
            await self.queue.put((index, None))
        except Failed as failed:
            await self.queue.put((index, failed))
