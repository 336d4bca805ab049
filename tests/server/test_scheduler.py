"""The scheduler's hand-over rules, in process over real ONNX Runtime sessions of a small
graph (a request that finds an instance idle runs at once; one batch per instance at a
time; a busy instance queues the next request; a batch refused for one request's values
runs each request alone; close waits for what runs), and that every run is counted."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from mmaas.backends.onnxruntime.runtime import OnnxRuntimeEngine
from mmaas.core.errors import InputError
from mmaas.server.batcher import Scheduler
from mmaas.server.metrics import ModelMetrics
from mmaas.server.settings import BatchingSettings


class WatchedEngine(OnnxRuntimeEngine):
    """A real ONNX Runtime engine (``y = x * 2``) that records how many runs overlap on
    it, waits ``hold_s`` in each, and refuses a NaN (as an engine refuses a value:
    InputError)."""

    def __init__(
        self, path: Path, hold_s: float = 0.0, meet: threading.Barrier | None = None
    ) -> None:
        super().__init__(ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]))
        self.hold_s = hold_s
        self.meet = meet  # every run waits for the other instances' runs to start too
        self.lock = threading.Lock()
        self.inside = self.most_inside = self.runs = 0
        self.threads: set[int] = set()

    def infer(
        self, inputs: Mapping[str, np.ndarray], outputs: Sequence[str]
    ) -> dict[str, np.ndarray]:
        with self.lock:
            self.inside += 1
            self.runs += 1
            self.most_inside = max(self.most_inside, self.inside)
            self.threads.add(threading.get_ident())
        try:
            time.sleep(self.hold_s)
            if self.meet is not None:
                self.meet.wait()
            if np.isnan(inputs["x"]).any():
                raise InputError("a NaN in a batch")
            return super().infer(inputs, outputs)
        finally:
            with self.lock:
                self.inside -= 1


@pytest.fixture(scope="module")
def double(tmp_path_factory: pytest.TempPathFactory) -> Path:
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["y"])],
        "double",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 2])],
        [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path_factory.mktemp("double") / "double.onnx"
    onnx.save(model, path)
    return path


def rows(value: float, count: int = 1) -> dict[str, np.ndarray]:
    return {"x": np.full((count, 2), value, np.float32)}


async def serve(
    engines: list[WatchedEngine], batching: BatchingSettings, requests: list[dict[str, np.ndarray]]
) -> tuple[list[object], ModelMetrics]:
    """Send ``requests`` at once to a scheduler over ``engines``; each one's answer (its
    ``y`` or its error) and the statistics."""
    metrics = ModelMetrics("double", "1")
    scheduler = Scheduler(engines, 4, batching, metrics)
    scheduler.start()
    try:
        answers = await asyncio.gather(
            *(scheduler.infer(r, ["y"], None) for r in requests), return_exceptions=True
        )
    finally:
        await scheduler.close()
    return [a if isinstance(a, BaseException) else a["y"] for a in answers], metrics


def test_one_instance_runs_one_request_at_a_time_and_answers_each(double: Path) -> None:
    engine = WatchedEngine(double, hold_s=0.02)
    answers, metrics = asyncio.run(serve([engine], BatchingSettings(), [rows(i) for i in range(5)]))
    assert [a.tolist() for a in answers] == [[[2.0 * i] * 2] for i in range(5)]  # type: ignore[union-attr]
    assert engine.most_inside == 1 and engine.runs == 5
    counted = metrics.snapshot()
    assert counted["execution_count"] == 5 and counted["inference_count"] == 5
    assert counted["duration_ns"]["queue"] > 4 * 0.02e9  # the later ones waited their turn


def test_two_instances_share_concurrent_requests(double: Path) -> None:
    meet = threading.Barrier(2, timeout=10)  # broken (an error) unless both run at once
    engines = [WatchedEngine(double, meet=meet), WatchedEngine(double, meet=meet)]
    answers, _ = asyncio.run(serve(engines, BatchingSettings(), [rows(1), rows(2)]))
    assert [e.runs for e in engines] == [1, 1]
    assert [a.tolist() for a in answers] == [[[2.0, 2.0]], [[4.0, 4.0]]]  # type: ignore[union-attr]


def test_a_refused_batch_runs_each_request_alone(double: Path) -> None:
    engine = WatchedEngine(double, hold_s=0.02)
    batching = BatchingSettings(enabled=True, max_queue_delay_us=50_000)
    requests = [rows(1), rows(float("nan")), rows(3)]
    answers, metrics = asyncio.run(serve([engine], batching, requests))
    assert isinstance(answers[1], InputError)  # only the request at fault fails
    assert [answers[0].tolist(), answers[2].tolist()] == [[[2.0, 2.0]], [[6.0, 6.0]]]  # type: ignore[union-attr]
    assert engine.runs == 4  # the batch of 3, refused; then each alone
    assert metrics.snapshot()["execution_count"] == 2


def test_close_waits_for_a_request_running_at_once(double: Path) -> None:
    engine = WatchedEngine(double, hold_s=0.1)

    async def scenario() -> tuple[bool, np.ndarray]:
        scheduler = Scheduler([engine], 4, BatchingSettings(), ModelMetrics("double", "1"))
        scheduler.start()
        request = asyncio.ensure_future(scheduler.infer(rows(5), ["y"], None))
        await asyncio.sleep(0.02)  # it runs now
        await scheduler.close()
        return request.done(), (await request)["y"]

    finished, answer = asyncio.run(scenario())
    assert finished and answer.tolist() == [[10.0, 10.0]]


def test_a_request_past_its_deadline_is_not_computed(double: Path) -> None:
    engine = WatchedEngine(double)

    async def scenario() -> BaseException | None:
        scheduler = Scheduler([engine], 4, BatchingSettings(), ModelMetrics("double", "1"))
        scheduler.start()
        try:
            await scheduler.infer(rows(1), ["y"], 0.0)
        except Exception as exc:
            return exc
        finally:
            await scheduler.close()
        return None

    refused = asyncio.run(scenario())
    assert refused is not None and getattr(refused, "status", "") == "DEADLINE_EXCEEDED"
    assert engine.runs == 0


def test_close_answers_a_refused_batch_s_requests_alone(double: Path) -> None:
    engine = WatchedEngine(double, hold_s=0.02)
    batching = BatchingSettings(enabled=True, max_queue_delay_us=20_000)

    async def scenario() -> list[object]:
        scheduler = Scheduler([engine], 4, batching, ModelMetrics("double", "1"))
        scheduler.start()
        requests = [rows(1), rows(float("nan")), rows(3)]
        sent = [asyncio.ensure_future(scheduler.infer(r, ["y"], None)) for r in requests]
        await asyncio.sleep(0)  # all three queued
        await asyncio.wait_for(scheduler.close(), 10)
        return await asyncio.gather(*sent, return_exceptions=True)

    answers = asyncio.run(scenario())
    assert isinstance(answers[1], InputError) and engine.runs == 4
    assert [answers[0]["y"].tolist(), answers[2]["y"].tolist()] == [[[2.0, 2.0]], [[6.0, 6.0]]]  # type: ignore[index]
