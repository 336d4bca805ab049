"""The generation loop over KV-cache slots: decode steps padded to a captured batch size
(C43: 3 sequences with batches {1, 2, 4}, every concurrency from 1 to 3, greedy ids equal to
each request alone), new prompts prefilled together in one run, requests beyond the slots
waiting for one (running, waiting and cache-use figures in the metrics) and refused beyond
the queue's bound (RESOURCE_EXHAUSTED, MMAAS_MAX_QUEUE_SIZE), the picture
embeddings cache, and the scheduler's bound on prompt tokens per turn."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mmaas.server.status import ResourceExhausted

from .conftest import PAIR, PROMPTS, Loop, request

pytestmark = pytest.mark.slow
JOBS = [(PROMPTS[0], [PAIR[0]]), (PROMPTS[1], [PAIR[1]]), ("Write a haiku.", [])]


@pytest.fixture(scope="module")
def padded(qwen_vl_export: Path) -> Iterator[Loop]:
    """3 sequences, decode batches {1, 2, 4}: a batch of 3 runs padded into the one of 4."""
    loop = Loop(qwen_vl_export, slots=3, batches=(1, 2, 4), image_cache=8)
    yield loop
    loop.close()


def ids_of(events) -> list[int]:
    return [event.token_id for event in events]


def recorded(loop: Loop, name: str) -> list[int]:
    """Wrap ``loop.runs.<name>`` to record each run's batch (rows of its first input)."""
    sizes: list[int] = []
    original = getattr(loop.runs, name)

    def wrapper(*args, **kwargs):
        sizes.append(len(args[-1]) if name == "decode" else len(args[3]))
        return original(*args, **kwargs)

    setattr(loop.runs, name, wrapper)
    return sizes


def test_decode_pads_to_the_captured_batch_and_ids_do_not_change(padded, pictures) -> None:
    reqs = [request(text, [pictures[n] for n in names], max_tokens=12) for text, names in JOBS]
    alone = [ids_of(padded.generate(req)) for req in reqs]
    assert sorted(padded.runs.graphs) == [1, 2, 4]
    decode = recorded(padded, "decode")
    try:
        for count in (1, 2, 3):  # every concurrency up to the limit
            together = [ids_of(e) for e in padded.generate_all(reqs[:count])]
            assert together == alone[:count]
    finally:
        del padded.runs.decode
    assert 4 in decode and set(decode) <= {1, 2, 4}  # 3 rows ran in the captured batch of 4


def test_new_prompts_are_prefilled_together(padded, pictures) -> None:
    reqs = [request(text, [pictures[n] for n in names], max_tokens=6) for text, names in JOBS]
    alone = [ids_of(padded.generate(req)) for req in reqs]
    prefill = recorded(padded, "prefill")
    try:
        together = [ids_of(e) for e in padded.generate_all(reqs)]
    finally:
        del padded.runs.prefill
    assert together == alone
    assert max(prefill) > 1, prefill  # one run held several new prompts


def test_requests_beyond_the_slots_wait_for_one(qwen_vl_export, pictures) -> None:
    loop = Loop(qwen_vl_export, slots=2)
    seen: list[tuple[int, int, int, int]] = []
    original = loop.metrics.set_sequences
    loop.metrics.set_sequences = lambda *figures: (seen.append(figures), original(*figures))
    try:
        reqs = [request(f"Question number {i}.", max_tokens=8) for i in range(5)]
        answers = loop.generate_all(reqs)
    finally:
        loop.close()
    assert [len(a) for a in answers] == [8] * 5
    assert max(waiting for _, waiting, _, _ in seen) >= 2
    assert max(used for _, _, used, _ in seen) == 2 and {slots for *_, slots in seen} == {2}
    text = "\n".join(loop.metrics.families())
    assert "mmaas_kv_cache_usage_ratio" in text
    assert loop.metrics.ttft.count == 5 and loop.metrics.itl.count == 5 * 7


def test_requests_beyond_the_slots_and_the_queue_are_refused_at_once(qwen_vl_export) -> None:
    """2 slots, at most 2 waiting: of 7 requests submitted at once 4 are answered, 3
    refused; nothing leaks (every slot free, the waiting gauge 0, the next ones answered)."""
    loop = Loop(qwen_vl_export, slots=2, max_waiting=2)
    try:
        prepared = [loop.generator.prepare(request(f"Question {i}.", max_tokens=40))
                    for i in range(7)]  # fmt: skip
        done = [threading.Event() for _ in prepared]
        refused: list[str] = []
        for index, ready in enumerate(prepared):

            def sink(event, flag=done[index]) -> None:
                if isinstance(event, BaseException) or event.finish_reason:
                    flag.set()

            try:
                loop.scheduler.submit(ready, sink)
            except ResourceExhausted as exc:
                refused.append(str(exc))
                done[index].set()
        assert all(flag.wait(300) for flag in done)
        assert len(refused) == 3, refused
        assert refused[0].startswith("queue full: 2 requests are waiting (MMAAS_MAX_QUEUE_SIZE=2)")
        assert loop.scheduler.unplaced == 0 and loop.scheduler.slots.used == 0
        assert loop.metrics.waiting == 0 and loop.metrics.running == 0
        again = loop.generate_all([request(f"Again {i}.", max_tokens=4) for i in range(4)])
        assert [len(a) for a in again] == [4] * 4
    finally:
        loop.close()


def test_a_picture_seen_before_skips_its_vision_run(padded, pictures) -> None:
    req = request(PROMPTS[0], [pictures[PAIR[1]]], max_tokens=8)
    first = ids_of(padded.generate(req))
    hits = padded.generator.pictures.hits
    assert ids_of(padded.generate(req)) == first
    assert padded.generator.pictures.hits == hits + 1


def test_prompt_tokens_per_turn_are_bounded(qwen_vl_export, pictures) -> None:
    loop = Loop(qwen_vl_export, slots=3, max_prefill_tokens=64)
    loop.scheduler.chunk = 64
    prefill = recorded(loop, "prefill")
    try:
        reqs = [request(PROMPTS[0], [pictures[PAIR[0]]], max_tokens=4) for _ in range(2)]
        answers = loop.generate_all(reqs)
    finally:
        loop.close()
    assert ids_of(answers[0]) == ids_of(answers[1])
    assert prefill and max(prefill) == 1  # 414-token prompts: 64-token chunks, one at a time
