"""The request path's stream of responses (:func:`mmaas.server.inference.responses`) over
an ordinary executor and over decoupled ones: one final response, many with the last final, an
added empty final, an error after responses, and cancellation reaching the executor.
In process, with the real request path and a real served model's signature."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import aclosing

import numpy as np
import pytest

from mmaas.server.inference import responses
from mmaas.server.metrics import ModelMetrics
from mmaas.server.repository import ConfigFacts, ServedModel
from mmaas.server.status import Unavailable
from mmaas.server.streaming import Response, is_decoupled

from . import graphs

Arrays = dict[str, np.ndarray]
TOKEN = "save_infer_model/scale_0.tmp_1"


class Ordinary:
    """An executor with one answer per request (what the batcher is)."""

    def start(self) -> None: ...

    async def close(self) -> None: ...

    async def infer(
        self, inputs: Arrays, outputs: Sequence[str], timeout_s: float | None
    ) -> Arrays:
        return {TOKEN: np.array([[0.25, 0.75]], np.float32)}


class Tokens(Ordinary):
    """A decoupled executor: ``count`` responses, the last flagged final if ``flag``,
    failing after ``fail_after`` responses; records whether it was closed."""

    def __init__(self, count: int, flag: bool = False, fail_after: int | None = None) -> None:
        self.count, self.flag, self.fail_after = count, flag, fail_after
        self.sent = 0
        self.closed = False

    async def responses(
        self, inputs: Mapping[str, np.ndarray], outputs: Sequence[str], timeout_s: float | None
    ) -> AsyncIterator[Response]:
        try:
            for index in range(self.count):
                if index == self.fail_after:
                    raise RuntimeError("the language engine failed at step 2")
                await asyncio.sleep(0)
                self.sent += 1
                final = self.flag and index == self.count - 1
                yield Response({TOKEN: np.full((1, 2), index, np.float32)}, final=final)
        finally:
            self.closed = True


def served(executor: object) -> ServedModel:
    info = graphs.ppocr_cls_info()
    model = ServedModel(
        info=info,
        message_limit=1 << 20,
        metrics=ModelMetrics(info.name, info.version),
        config=ConfigFacts(
            platform="onnxruntime_onnx", device_kind="CPU", instance_count=1, batching=False
        ),
        executor=executor,  # type: ignore[arg-type]
        state="ready",
    )
    return model


async def collect(executor: object) -> list[Response]:
    model = served(executor)
    inputs = {"x": np.zeros((1, 3, 48, 192), np.float32)}
    return [r async for r in responses(model, inputs, [TOKEN], None)]


def test_an_ordinary_model_answers_once_and_final() -> None:
    responses = asyncio.run(collect(Ordinary()))
    assert [r.final for r in responses] == [True]
    np.testing.assert_array_equal(responses[0].outputs[TOKEN], [[0.25, 0.75]])
    assert not is_decoupled(Ordinary()) and is_decoupled(Tokens(1))


def test_a_decoupled_model_streams_every_response_then_an_empty_final() -> None:
    responses = asyncio.run(collect(Tokens(3)))
    assert [r.final for r in responses] == [False, False, False, True]
    assert [r.outputs[TOKEN][0, 0] for r in responses[:3]] == [0, 1, 2]
    assert responses[-1].outputs == {}


def test_a_response_flagged_final_is_the_last() -> None:
    responses = asyncio.run(collect(Tokens(3, flag=True)))
    assert [r.final for r in responses] == [False, False, True]
    assert responses[-1].outputs[TOKEN][0, 0] == 2


def test_an_error_after_responses_reaches_the_caller_after_them() -> None:
    executor = Tokens(5, fail_after=2)
    model = served(executor)
    got: list[Response] = []

    async def run() -> None:
        async for response in responses(model, {}, [TOKEN], None):
            got.append(response)

    with pytest.raises(RuntimeError, match="failed at step 2"):
        asyncio.run(run())
    assert len(got) == 2 and executor.closed


def test_closing_the_stream_stops_the_executor_at_once() -> None:
    executor = Tokens(1000)
    model = served(executor)

    async def run() -> None:
        async with aclosing(responses(model, {}, [TOKEN], None)) as stream:
            async for response in stream:
                if response.outputs[TOKEN][0, 0] == 3:
                    break

    asyncio.run(run())
    assert executor.closed and executor.sent == 4


def test_a_model_not_ready_is_unavailable_before_any_response() -> None:
    model = served(Tokens(3))
    model.state = "draining"

    async def first() -> Response:
        return await anext(responses(model, {}, [TOKEN], None))

    with pytest.raises(Unavailable, match="shutting down"):
        asyncio.run(first())
