"""MMAAS_MAX_QUEUE_SIZE bounds the requests waiting for a sequence slot of ``mmaas serve
models/qwen-vl``: with a queue of 2 and more concurrent requests than the slots and the
queue hold, the extra ones are refused at once (OpenAI: 429 ``rate_limit_error``; gRPC:
RESOURCE_EXHAUSTED), each choice of ``n`` counting as a request; the others are answered,
and afterwards nothing is left waiting or holding a slot."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as triton
from tritonclient.utils import InferenceServerException

from server.conftest import free_ports

from .conftest import Served, serving

pytestmark = pytest.mark.slow
QUEUE = 2
TOKENS = 1000  # ~1 s an answer here: every request arrives while the first ones run
FULL = f"queue full: {QUEUE} requests are waiting (MMAAS_MAX_QUEUE_SIZE={QUEUE})"


@pytest.fixture(scope="module")
def crowded(qwen_vl_export: Path, tmp_path_factory) -> Iterator[tuple[Served, int]]:
    """The server with MMAAS_MAX_QUEUE_SIZE=2, and its metrics port."""
    (metrics_port,) = free_ports(1)
    root = tmp_path_factory.mktemp("queue")
    with serving(qwen_vl_export, root, {"MMAAS_MAX_QUEUE_SIZE": str(QUEUE)}, metrics_port) as s:
        yield s, metrics_port


def gauges(metrics_port: int) -> dict[str, float]:
    """The generation gauges of the metrics endpoint."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    names = ("mmaas_num_requests_waiting", "mmaas_num_requests_running")
    return {line.split("{")[0].split(" ")[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line.startswith(names)}  # fmt: skip


def chat(served: Served, index: int, n: int = 1) -> tuple[int, dict]:
    message = {"role": "user", "content": f"Tell a story, number {index}."}
    body = {"model": "qwen-vl", "max_tokens": TOKENS, "n": n, "messages": [message]}
    return served.chat(body)


def assert_nothing_left(served: Served, metrics_port: int) -> None:
    """The gauges at 0 (the engine thread sets them after the turn whose tokens ended the
    last answers: a moment after those arrived), and a new request answered."""
    idle = {"mmaas_num_requests_waiting": 0.0, "mmaas_num_requests_running": 0.0}
    deadline = time.monotonic() + 10
    while gauges(metrics_port) != idle and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gauges(metrics_port) == idle
    status, answer = chat(served, 99)
    assert status == 200, answer


def test_chat_requests_beyond_the_slots_and_the_queue_get_429(crowded) -> None:
    served, metrics_port = crowded
    with ThreadPoolExecutor(12) as pool:
        replies = list(pool.map(lambda i: chat(served, i), range(12)))
    statuses = [status for status, _ in replies]
    assert set(statuses) == {200, 429}, replies
    assert statuses.count(200) >= 4 + QUEUE, statuses  # every slot (4) and the queue
    for status, answer in replies:
        if status == 429:
            assert answer["error"]["type"] == "rate_limit_error", answer
            assert answer["error"]["message"].startswith(FULL), answer
        else:
            assert answer["choices"][0]["finish_reason"] in ("length", "stop"), answer
    assert_nothing_left(served, metrics_port)


def test_each_choice_counts_and_a_refused_choice_ends_its_siblings(crowded) -> None:
    served, metrics_port = crowded
    with ThreadPoolExecutor(6) as pool:
        replies = list(pool.map(lambda i: chat(served, i, n=3), range(6)))  # 18 choices
    statuses = [status for status, _ in replies]
    assert 429 in statuses and 200 in statuses, statuses
    for status, answer in replies:
        assert status == 429 or len(answer["choices"]) == 3, answer
    assert_nothing_left(served, metrics_port)


def test_grpc_requests_beyond_the_queue_get_resource_exhausted(crowded) -> None:
    served, metrics_port = crowded

    def infer(index: int) -> str:
        grpc = triton.InferenceServerClient(f"127.0.0.1:{served.grpc_port}")
        text = triton.InferInput("text_input", [1], "BYTES")
        text.set_data_from_numpy(np.array([f"Story {index}.".encode()], dtype=object))
        tokens = triton.InferInput("max_tokens", [1], "INT32")
        tokens.set_data_from_numpy(np.array([TOKENS], dtype=np.int32))
        try:
            grpc.infer("qwen-vl", [text, tokens])
            return "OK"
        except InferenceServerException as exc:
            assert str(exc.message()).startswith(FULL), exc.message()
            return str(exc.status())
        finally:
            grpc.close()

    with ThreadPoolExecutor(12) as pool:
        outcomes = list(pool.map(infer, range(12)))
    assert set(outcomes) == {"OK", "StatusCode.RESOURCE_EXHAUSTED"}, outcomes
    assert outcomes.count("OK") >= 4 + QUEUE, outcomes
    assert_nothing_left(served, metrics_port)
