"""The generation model's executor: the server's ``Executor`` (``infer``: the whole answer, for
ModelInfer and HTTP ``/generate``) and ``Decoupled`` (``responses``: one response per token,
for ModelStreamInfer and ``/generate_stream``), over one :class:`.scheduler.Scheduler`.

Per request: read the values (:mod:`.request`), check and preprocess in a worker thread
(:meth:`Generator.prepare`: every bad input is an InputError here, before the engine thread
sees it) within the bound on decoded pictures in flight (:mod:`.budget`), submit to the
engine thread, then await its events on the event loop. Closing the response iterator (the
client left) cancels the request: its row leaves the batch before the next decode step.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping, Sequence

import numpy as np

from mmaas.pipelines.qwen2_vl.runtime.budget import DecodeBudget
from mmaas.pipelines.qwen2_vl.runtime.generation import Generator, TokenEvent
from mmaas.pipelines.qwen2_vl.runtime.logprobs import LogprobText
from mmaas.pipelines.qwen2_vl.runtime.request import read_request, token_outputs
from mmaas.pipelines.qwen2_vl.runtime.scheduler import Scheduler
from mmaas.pipelines.qwen2_vl.runtime.text import TextStream
from mmaas.server.llm_metrics import GenerationMetrics
from mmaas.server.streaming import Response

Arrays = dict[str, np.ndarray]
UNARY = ("text_output", "output_ids", "finish_reason", "num_input_tokens", "output_logprobs")


class GenerationExecutor:
    """See the module docstring. The scheduler's engine thread is already running (started
    and warmed up by the runtime part); ``generation_metrics`` is what the server exposes
    beside Triton's metrics (:mod:`mmaas.server.llm_metrics`)."""

    def __init__(
        self,
        generator: Generator,
        scheduler: Scheduler,
        metrics: GenerationMetrics,
        budget: DecodeBudget,
    ) -> None:
        self.generator = generator
        self.scheduler = scheduler
        self.generation_metrics = metrics
        self.budget = budget  # decoded pictures in flight
        self.logprob_text = LogprobText(generator.tokenizer)

    def start(self) -> None:
        """Nothing: the engine thread runs since the runtime part warmed it up."""

    async def responses(
        self, inputs: Mapping[str, np.ndarray], outputs: Sequence[str], timeout_s: float | None
    ) -> AsyncIterator[Response]:
        """One response per generated token: ``text_output`` = the text that token completes
        (possibly empty; :mod:`.text`'s rules), ``output_ids`` = [its id],
        ``finish_reason`` on the last one, which is ``final``.

        Raises:
            InputError: the request is invalid (before any response).
            ResourceExhausted: MMAAS_MAX_QUEUE_SIZE requests already wait for a sequence
                slot (before any response).
            Exception: the engine failed (the request ends; others go on).
        """
        arrived = time.perf_counter()
        loop = asyncio.get_running_loop()
        request = read_request(inputs)
        self.scheduler.refuse_if_full()  # before decoding its pictures; submit counts it
        async with self.budget.hold(request.images):
            prepared = await loop.run_in_executor(None, self.generator.prepare, request)
        events: asyncio.Queue[TokenEvent | BaseException] = asyncio.Queue()

        def sink(event: TokenEvent | BaseException) -> None:  # on the engine thread
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
                loop.call_soon_threadsafe(events.put_nowait, event)

        text = TextStream(self.generator.text, request.stop)
        ticket = self.scheduler.submit(prepared, sink, arrived)
        try:
            while True:
                event = await events.get()
                if isinstance(event, BaseException):
                    raise event
                piece, reason = text.push(event)
                entries = [self.logprob_text(event.logprobs)] if event.logprobs else []
                tensors = token_outputs(piece, [event.token_id], reason, len(prepared.ids), entries)
                yield Response({name: tensors[name] for name in outputs}, final=bool(reason))
                if reason:
                    return  # a stop string ends it early: the ticket's row leaves the batch
        finally:
            ticket.cancel()

    async def infer(
        self, inputs: Mapping[str, np.ndarray], outputs: Sequence[str], timeout_s: float | None
    ) -> Arrays:
        """The whole answer: ``text_output`` [1] (the responses' texts joined), every id in
        ``output_ids``, the last response's ``finish_reason``."""
        ids: list[int] = []
        pieces: list[bytes] = []
        entries: list[bytes] = []
        async for response in self.responses(inputs, list(UNARY), timeout_s):
            ids.extend(int(i) for i in response.outputs["output_ids"])
            pieces.append(response.outputs["text_output"][0])
            entries.extend(response.outputs["output_logprobs"])
        last = response.outputs
        reason = last["finish_reason"][0].decode()
        prompt = int(last["num_input_tokens"][0])
        tensors = token_outputs(b"".join(pieces).decode(), ids, reason, prompt, entries)
        return {name: tensors[name] for name in outputs}

    async def close(self) -> None:
        """Finish the requests in flight, then stop the engine thread."""
        await asyncio.get_running_loop().run_in_executor(None, self.scheduler.close)
