"""The one request path (:class:`mmaas.server.dataplane.DataPlane`) in process, with the
real codec, a real served model's signature and small executors: one answer and a stream
of answers, an unknown model answered once and counted nowhere, a malformed request
counted as rejected, a stream closed before its final response counted as cancelled (and
its executor stopped), one closed after it counted as a success, and a decoupled model's
outputs refused in shared memory."""

from __future__ import annotations

import asyncio
import gc
import uuid
import weakref
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import numpy as np
import pytest
import tritonclient.utils.shared_memory as triton_shm

from mmaas.core.errors import InputError
from mmaas.server.dataplane import DataPlane, Failed
from mmaas.server.protocol.memory import SharedMemory
from mmaas.server.protocol.shm import TensorRef
from mmaas.server.protocol.types import (
    InferInput,
    InferRequest,
    InferResponse,
    RawBytes,
    RequestedOutput,
)
from mmaas.server.repository import Repository, ServedModel
from mmaas.server.status import InvalidArgument
from mmaas.server.streaming import Response

from .test_streaming import TOKEN, Ordinary, Tokens, served

IMAGE = np.zeros((1, 3, 48, 192), np.float32)


class Given:
    """An exchange that reads ``request`` (or raises it) and writes the neutral response."""

    def __init__(self, request: InferRequest | Exception) -> None:
        self.request = request

    async def read(self, model: ServedModel) -> InferRequest:
        if isinstance(self.request, Exception):
            raise self.request
        return self.request

    def write(self, model: ServedModel, request: InferRequest, response: InferResponse) -> Any:
        return response


def request(shape: tuple[int, ...] = IMAGE.shape, **outputs: TensorRef) -> Given:
    image = InferInput("x", "FP32", shape, RawBytes(np.zeros(shape, np.float32).tobytes()))
    wishes = [RequestedOutput(name, ref=ref) for name, ref in outputs.items()]
    return Given(InferRequest("r1", [image], wishes, size=IMAGE.nbytes))


def plane_of(executor: object) -> tuple[DataPlane, ServedModel]:
    model = served(executor)
    return DataPlane(Repository([model]), SharedMemory()), model


def counts(model: ServedModel) -> tuple[int, dict[str, int]]:
    snapshot = model.metrics.snapshot()
    return snapshot["success"], snapshot["failures"]


def test_one_answer_with_the_models_name_and_the_request_id() -> None:
    plane, model = plane_of(Ordinary())
    response = asyncio.run(plane.infer("ppocr-cls", "", request()))
    assert (response.model_name, response.model_version, response.id) == ("ppocr-cls", "1", "r1")
    ((output),) = response.outputs
    assert (output.name, output.datatype, output.shape) == (TOKEN, "FP32", (1, 2))
    assert counts(model) == (1, {})


def test_an_unknown_model_is_one_failure_counted_nowhere() -> None:
    plane, model = plane_of(Ordinary())
    with pytest.raises(Failed) as info:
        asyncio.run(plane.infer("nope", "", request()))
    assert info.value.failure.status == "NOT_FOUND" and info.value.model is None
    assert "unknown model 'nope' in model_name" in info.value.failure.message
    assert counts(model) == (0, {})


def test_a_malformed_request_is_rejected_and_counted() -> None:
    plane, model = plane_of(Ordinary())
    with pytest.raises(Failed) as info:
        asyncio.run(plane.infer("ppocr-cls", "", request((1, 3, 48, 100))))
    assert info.value.failure.status == "INVALID_ARGUMENT" and info.value.model is model
    assert "input 'x': shape [1, 3, 48, 100] is outside the optimization profile" in (
        info.value.failure.message
    )
    with pytest.raises(Failed, match="the wire said no"):
        asyncio.run(plane.infer("ppocr-cls", "", Given(InvalidArgument("the wire said no"))))
    assert counts(model) == (0, {"REJECTED": 2})


def test_a_stream_yields_every_response_and_the_final_last() -> None:
    plane, model = plane_of(Tokens(3))

    async def collect() -> list[InferResponse]:
        return [r async for r in plane.stream("ppocr-cls", "", request())]

    got = asyncio.run(collect())
    assert [r.final for r in got] == [False, False, False, True]
    assert got[-1].outputs == [] and {r.id for r in got} == {"r1"}
    assert counts(model) == (1, {})


@pytest.mark.parametrize(("stop_at", "counted"), [(1, (0, {"CANCELED": 1})), (3, (1, {}))])
def test_closing_a_stream_cancels_it_only_before_its_final_response(stop_at, counted) -> None:
    executor = Tokens(3, flag=True)
    plane, model = plane_of(executor)

    async def take() -> None:
        seen = 0
        async with aclosing(plane.stream("ppocr-cls", "", request())) as stream:
            async for _ in stream:
                seen += 1
                if seen == stop_at:
                    break

    asyncio.run(take())
    assert executor.closed and counts(model) == counted


def test_a_decoupled_models_outputs_cannot_go_to_shared_memory() -> None:
    plane, model = plane_of(Tokens(3))
    key = f"/mmaas-test-{uuid.uuid4().hex[:12]}"
    handle = triton_shm.create_shared_memory_region("o", key, 64)
    plane.shm.register_system("o", key, 0, 64)

    async def first() -> InferResponse:
        wish = request(**{TOKEN: TensorRef("o", 0, 8)})
        return await anext(plane.stream("ppocr-cls", "", wish))

    try:
        with pytest.raises(Failed) as info:
            asyncio.run(first())
    finally:
        plane.shm.close()
        triton_shm.destroy_shared_memory_region(handle)
    assert info.value.failure.message.startswith(
        "outputs of a decoupled model cannot go to shared memory"
    )
    assert counts(model) == (0, {"REJECTED": 1})


class Refusing(Ordinary):
    """An executor that refuses every request's values after taking weak references to
    its inputs (what a CUDA region's device array is: it pins the region while alive)."""

    def __init__(self) -> None:
        self.seen: list[weakref.ref[np.ndarray]] = []

    async def infer(
        self, inputs: dict[str, np.ndarray], outputs: list[str], timeout_s: float | None
    ) -> dict[str, np.ndarray]:
        self.seen += [weakref.ref(array) for array in inputs.values()]
        raise InputError("input 'x': the engine refused its values")

    async def responses(
        self, inputs: dict[str, np.ndarray], outputs: list[str], timeout_s: float | None
    ) -> AsyncIterator[Response]:
        await self.infer(inputs, outputs, timeout_s)
        yield Response({}, final=True)  # never reached


@pytest.mark.parametrize("streamed", [False, True])
def test_a_failed_requests_inputs_end_with_it_not_at_the_next_garbage_collection(
    streamed: bool,
) -> None:
    """The error a front end holds while it answers does not keep the request's decoded
    inputs alive (the frame that catches an error and the error's traceback reference
    each other): with the collector off, they are gone once the request has failed."""
    executor = Refusing()
    plane, _ = plane_of(executor)

    async def ask() -> None:
        if streamed:
            async for _ in plane.stream("ppocr-cls", "", request()):
                pass
        else:
            await plane.infer("ppocr-cls", "", request())

    gc.disable()
    try:
        with pytest.raises(Failed) as info:
            asyncio.run(ask())
        assert info.value.failure.status == "INVALID_ARGUMENT"
        assert executor.seen and all(seen() is None for seen in executor.seen)
    finally:
        gc.enable()
