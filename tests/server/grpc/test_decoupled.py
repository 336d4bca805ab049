"""A decoupled model (many responses per request: :mod:`mmaas.server.streaming`) behind the
real gRPC server, in process, driven by tritonclient.grpc ``stream_infer``: every response
in order with the request's id, ``triton_final_response`` false then true, the empty final
response only when asked, an error after two responses, ModelConfig's decoupled flag, and
a client that leaves stopping the generation. The model is a small counting executor (the
qwen-vl generation model codes against the same interface; its own tests drive it)."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence

import numpy as np
import pytest
import tritonclient.grpc as triton
from grpc_health.v1._async import HealthServicer

from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.server.context import ServerContext
from mmaas.server.grpc.server import grpc_server
from mmaas.server.metrics import ModelMetrics
from mmaas.server.repository import ConfigFacts, Repository, ServedModel
from mmaas.server.settings import Settings
from mmaas.server.streaming import Response

from ..conftest import free_port

Arrays = dict[str, np.ndarray]


class Counter:
    """Answers ``count`` [n] with n responses ``token`` = 0, 1, ...; n = 99 fails after 2;
    flags the last final unless n is 5 (then the path adds an empty final)."""

    def __init__(self) -> None:
        self.stopped = threading.Event()

    def start(self) -> None: ...

    async def close(self) -> None: ...

    async def infer(
        self, inputs: Arrays, outputs: Sequence[str], timeout_s: float | None
    ) -> Arrays:
        tokens = [r.outputs["token"] async for r in self.responses(inputs, outputs, timeout_s)]
        return {"token": np.concatenate(tokens)}

    async def responses(
        self, inputs: Mapping[str, np.ndarray], outputs: Sequence[str], timeout_s: float | None
    ) -> AsyncIterator[Response]:
        count = int(inputs["count"][0])
        try:
            for index in range(count):
                if count == 99 and index == 2:
                    raise RuntimeError("the decoder failed at step 2")
                await asyncio.sleep(0.01)
                last = index == count - 1 and count != 5
                yield Response({"token": np.array([index], np.int64)}, final=last)
        finally:
            self.stopped.set()


def counter_info() -> ModelInfo:
    return ModelInfo(
        "counter",
        "1.0.0",
        "onnxruntime",
        "fp32",
        0,
        (TensorInfo("count", "INT64", (1,), (1,), (1,), (1,)),),
        (TensorInfo("token", "INT64", (-1,)),),
    )


class InProcess:
    """The counter behind the real gRPC server on an event loop thread."""

    def __init__(self) -> None:
        self.port = free_port()
        self.executor = Counter()
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self.main(),))

    async def main(self) -> None:
        info = counter_info()
        facts = ConfigFacts("python", "CPU", 1, batching=False, decoupled=True)
        model = ServedModel(info, 1 << 20, ModelMetrics("counter", "1"), facts, self.executor)
        model.state = "ready"
        context = ServerContext.create(Repository([model]))
        settings = Settings(host="127.0.0.1", grpc_port=self.port)
        server = grpc_server(settings, context, HealthServicer())
        await server.start()
        self.stop = asyncio.Event()
        self.ready.set()
        await self.stop.wait()
        await server.stop(0)

    def __enter__(self) -> InProcess:
        self.thread.start()
        assert self.ready.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(30)


@pytest.fixture(scope="module")
def counter() -> Iterator[InProcess]:
    with InProcess() as server:
        yield server


def count(n: int) -> triton.InferInput:
    tensor = triton.InferInput("count", [1], "INT64")
    tensor.set_data_from_numpy(np.array([n], np.int64))
    return tensor


def stream(server: InProcess, *requests: tuple[int, str, bool]) -> list[tuple[object, object]]:
    """Send ``(n, id, empty_final)`` requests on one stream; every callback until quiet."""
    client = triton.InferenceServerClient(f"127.0.0.1:{server.port}")
    results: queue.Queue[tuple[object, object]] = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    for n, request_id, empty_final in requests:
        client.async_stream_infer(
            "counter", [count(n)], request_id=request_id, enable_empty_final_response=empty_final
        )
    got = []
    try:
        while True:
            got.append(results.get(timeout=2))
    except queue.Empty:
        pass
    client.stop_stream()
    return got


def summary(got: list[tuple[object, object]]) -> list[tuple[str, list[int], bool]]:
    out = []
    for result, error in got:
        assert error is None, error
        response = result.get_response()  # type: ignore[attr-defined]
        tokens = result.as_numpy("token").tolist() if response.outputs else []  # type: ignore[attr-defined]
        out.append((response.id, tokens, response.parameters["triton_final_response"].bool_param))
    return out


def test_every_response_in_order_and_the_last_final(counter: InProcess) -> None:
    assert summary(stream(counter, (3, "a", False))) == [
        ("a", [0], False),
        ("a", [1], False),
        ("a", [2], True),
    ]


def test_an_empty_final_response_only_when_asked(counter: InProcess) -> None:
    asked = summary(stream(counter, (5, "b", True)))
    assert asked[-1] == ("b", [], True) and len(asked) == 6
    not_asked = summary(stream(counter, (5, "c", False)))
    assert len(not_asked) == 5 and not any(final for _, _, final in not_asked)


def test_an_error_after_two_responses_ends_that_request_only(counter: InProcess) -> None:
    got = stream(counter, (99, "bad", False), (2, "good", False))
    errors = [error for _, error in got if error is not None]
    assert len(errors) == 1 and "the decoder failed at step 2" in errors[0].message()  # type: ignore[attr-defined]
    answered = summary([g for g in got if g[1] is None])
    assert [t for i, t, _ in answered if i == "bad"] == [[0], [1]]
    assert [(t, f) for i, t, f in answered if i == "good"] == [([0], False), ([1], True)]


def test_model_infer_joins_and_config_says_decoupled(counter: InProcess) -> None:
    client = triton.InferenceServerClient(f"127.0.0.1:{counter.port}")
    assert client.infer("counter", [count(4)]).as_numpy("token").tolist() == [0, 1, 2, 3]
    config = client.get_model_config("counter").config
    assert config.model_transaction_policy.decoupled is True


def test_a_client_that_leaves_stops_the_generation(counter: InProcess) -> None:
    counter.executor.stopped.clear()
    client = triton.InferenceServerClient(f"127.0.0.1:{counter.port}")
    first: queue.Queue[object] = queue.Queue()
    client.start_stream(callback=lambda result, error: first.put(result))
    client.async_stream_infer("counter", [count(100000)], request_id="long")
    assert first.get(timeout=10) is not None
    client.stop_stream(cancel_requests=True)
    assert counter.executor.stopped.wait(10), "the generation went on after the client left"
