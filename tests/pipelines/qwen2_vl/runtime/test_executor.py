"""The generation model's executor on the event loop: concurrent requests share decode steps
(continuous batching) and each still equals its own transformers answer; the stream equals
the unary answer; a client that leaves stops its generation within a step while the others
go on; a bad request is refused before any response; an engine failure ends only the
requests of that step."""

from __future__ import annotations

import asyncio
import contextlib

import numpy as np
import pytest

from mmaas.core.errors import InputError
from mmaas.pipelines.qwen2_vl.runtime.budget import DecodeBudget
from mmaas.pipelines.qwen2_vl.runtime.executor import GenerationExecutor

from .conftest import PAIR, PROMPTS, Loop
from .test_generation import reference_ids

pytestmark = pytest.mark.slow
OUTPUTS = ["text_output", "output_ids", "finish_reason", "num_input_tokens"]


def inputs(text: str, images=(), **scalars) -> dict[str, np.ndarray]:
    """The interface's tensors as the request path hands them over."""
    arrays = {"text_input": np.array([text.encode()], dtype=object)}
    if images:
        arrays["image"] = np.array(list(images), dtype=object)
    dtypes = {"temperature": np.float32, "top_p": np.float32}
    for name, value in scalars.items():
        arrays[name] = np.array([value], dtype=dtypes.get(name, np.int32))
    return arrays


@pytest.fixture
def running(qwen_vl_export):
    """A loop of its own (its step counts are this test's)."""
    loop = Loop(qwen_vl_export)
    yield loop
    loop.close()


@pytest.fixture
def executor(running):
    executor = GenerationExecutor(
        running.generator, running.scheduler, running.metrics, DecodeBudget(1 << 30)
    )
    executor.start()
    return executor


async def stream(executor, arrays, limit=None) -> list:
    responses = []
    async with contextlib.aclosing(executor.responses(arrays, OUTPUTS, None)) as iterator:
        async for response in iterator:
            responses.append(response)
            if limit and len(responses) == limit:
                break
    return responses


def test_concurrent_requests_are_batched_and_each_equals_transformers(
    executor, reference, pictures
) -> None:
    jobs = [
        ([PAIR[0]], PROMPTS[0], 32),
        ([PAIR[1]], PROMPTS[1], 20),
        ([PAIR[1], PAIR[0]], PROMPTS[0], 28),
        ([], "Hello there.", 32),
    ]

    async def one(index, names, text, n):
        await asyncio.sleep(0.05 * index)  # staggered: each joins a running batch
        arrays = inputs(text, [pictures[x] for x in names], max_tokens=n)
        return await executor.infer(arrays, OUTPUTS, None)

    async def all_of():
        return await asyncio.gather(*(one(i, *job) for i, job in enumerate(jobs)))

    results = asyncio.run(all_of())
    for (names, text, n), result in zip(jobs, results, strict=True):
        assert result["output_ids"].tolist() == reference_ids(reference, pictures, names, text, n)
    assert executor.scheduler.rows / executor.scheduler.steps > 1.5  # steps were shared


def test_the_stream_equals_the_unary_answer(executor, pictures) -> None:
    arrays = inputs(PROMPTS[1], [pictures["rocket.jpg"]], max_tokens=24)
    responses = asyncio.run(stream(executor, arrays))
    unary = asyncio.run(executor.infer(arrays, OUTPUTS, None))
    ids = [int(r.outputs["output_ids"][0]) for r in responses]
    text = b"".join(r.outputs["text_output"][0] for r in responses)
    assert ids == unary["output_ids"].tolist()
    assert text == unary["text_output"][0]
    assert [r.final for r in responses] == [False] * 23 + [True]
    assert unary["output_ids"].dtype == np.int32
    assert [r.outputs["finish_reason"][0] for r in responses] == [b""] * 23 + [b"length"]
    assert unary["finish_reason"].tolist() == [b"length"]
    assert text.decode() == generator_text(executor, unary["output_ids"].tolist())


def generator_text(executor, ids) -> str:
    return executor.generator.tokenizer.decode(ids, skip_special_tokens=True)


def test_a_stop_string_ends_the_answer_before_it(executor, pictures) -> None:
    """C37: greedy, a stop string from the middle of the answer spanning two tokens: the
    streamed text joined equals the unary text, which ends just before it; finish_reason
    stop; the ids end with the token that completed it."""
    arrays = inputs(PROMPTS[0], [pictures["rocket.jpg"]], max_tokens=40)
    plain = asyncio.run(executor.infer(arrays, OUTPUTS, None))
    ids = plain["output_ids"].tolist()
    pieces = [generator_text(executor, ids[:n]) for n in range(len(ids) + 1)]
    cut = next(
        n
        for n in range(4, len(ids))
        if len(pieces[n]) - len(pieces[n - 1]) >= 1 and len(pieces[n + 1]) - len(pieces[n]) >= 1
    )
    stop = pieces[cut][-1] + pieces[cut + 1][len(pieces[cut])]  # last char + next token's first
    arrays["stop"] = np.array([stop.encode()], dtype=object)
    streamed = asyncio.run(stream(executor, arrays))
    unary = asyncio.run(executor.infer(arrays, OUTPUTS, None))
    joined = b"".join(r.outputs["text_output"][0] for r in streamed).decode()
    assert joined == unary["text_output"][0].decode()
    expected = pieces[-1][: pieces[-1].index(stop)]
    assert joined == expected and stop not in joined
    assert unary["finish_reason"].tolist() == [b"stop"]
    assert [r.final for r in streamed][-1] and not any(r.final for r in streamed[:-1])


def test_a_client_that_leaves_stops_its_generation(executor, pictures) -> None:
    long = inputs(PROMPTS[0], [pictures["grace_hopper.jpg"]], max_tokens=500)

    async def leave_then_ask():
        first = await stream(executor, long, limit=3)
        await asyncio.sleep(0.3)
        steps = executor.scheduler.steps
        answer = await executor.infer(inputs("Hi", max_tokens=4), OUTPUTS, None)
        return first, executor.scheduler.steps - steps, answer

    first, steps, answer = asyncio.run(leave_then_ask())
    assert len(first) == 3
    assert steps <= 4  # only the new request's steps ran: the left one's row was dropped
    assert len(answer["output_ids"]) == 4


def test_a_bad_request_is_refused_before_any_response(executor) -> None:
    with pytest.raises(InputError, match=r"'temperature': -1.0 is out of range"):
        asyncio.run(stream(executor, inputs("Hi", temperature=-1.0)))
    with pytest.raises(InputError, match="'text_input': not UTF-8 text"):
        asyncio.run(stream(executor, {"text_input": np.array([b"\xff\xfe"], dtype=object)}))
    answer = asyncio.run(executor.infer(inputs("Hi", max_tokens=3), OUTPUTS, None))
    assert len(answer["output_ids"]) == 3


def test_an_engine_failure_ends_only_its_requests(executor, running) -> None:
    decode = running.runs.decode

    def failing(*args):  # decode steps fail, prefill works
        raise RuntimeError("simulated engine failure")

    running.runs.decode = failing
    try:
        with pytest.raises(RuntimeError, match="simulated engine failure"):
            asyncio.run(executor.infer(inputs("Hi", max_tokens=8), OUTPUTS, None))
    finally:
        running.runs.decode = decode
    answer = asyncio.run(executor.infer(inputs("Hi", max_tokens=3), OUTPUTS, None))
    assert len(answer["output_ids"]) == 3
