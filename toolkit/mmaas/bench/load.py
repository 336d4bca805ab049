"""``mmaas bench``: a closed-loop load generator for any KServe v2 gRPC server (mmaas,
Triton, MLServer), in the manner of Triton's perf_analyzer (not available here).

For each concurrency level, ``concurrency`` clients (``tritonclient.grpc.aio``, one
channel) each send a request, wait for its answer and send the next, for ``duration_s``
seconds (or ``max_requests`` requests) after ``warmup_requests`` unmeasured ones.
Inputs are deterministic random data (:func:`mmaas.core.samples.sample_inputs`) at the given
shapes, with the datatypes the server's ModelMetadata declares. Latencies are
client-side, in ms; throughput is answered requests per second.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tritonclient.grpc.aio as triton_aio
from tritonclient.grpc import InferInput
from tritonclient.utils import InferenceServerException

from mmaas.core.errors import MmaasError, UsageError
from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.core.samples import sample_inputs

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class BenchRequest:
    """What to measure. ``url`` is ``host:port``; ``shapes`` gives each input with a
    dynamic dim its full shape (static inputs default to their declared shape);
    ``duration_s`` and ``max_requests`` bound each level (whichever ends first)."""

    url: str
    model: str
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    concurrency: tuple[int, ...] = (1,)
    duration_s: float = 10.0
    max_requests: int | None = None
    warmup_requests: int = 5
    model_version: str = ""


@dataclass(frozen=True)
class LevelResult:
    """One concurrency level: answered ``requests``, ``errors`` (with up to 3 distinct
    ``error_samples``), wall ``duration_s``, ``throughput_rps`` (answered requests/s) and
    client-side latencies in ms."""

    concurrency: int
    requests: int
    errors: int
    duration_s: float
    throughput_rps: float
    mean_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    error_samples: tuple[str, ...] = ()


def run(request: BenchRequest) -> list[LevelResult]:
    """Measure every concurrency level of ``request`` in order.

    Raises:
        MmaasError: the server cannot be reached or does not serve the model.
        UsageError: an input with a dynamic dim has no shape, or a shape names no input.
    """
    return asyncio.run(measure(request))


async def measure(request: BenchRequest) -> list[LevelResult]:
    """:func:`run` as a coroutine."""
    client = triton_aio.InferenceServerClient(request.url)
    try:
        inputs = await _inputs(client, request)
        for _ in range(request.warmup_requests):
            await client.infer(request.model, inputs, model_version=request.model_version)
        return [await _level(client, request, inputs, level) for level in request.concurrency]
    except InferenceServerException as exc:
        raise MmaasError(
            f"{request.url}: model {request.model!r}: {exc.message()} ({exc.status()})"
        ) from None
    finally:
        await client.close()


def format_table(results: Sequence[LevelResult]) -> str:
    """A fixed-width text table, one row per concurrency level."""
    header = (
        f"{'concurrency':>11} {'requests':>9} {'errors':>7} {'req/s':>9} "
        f"{'mean ms':>9} {'p50 ms':>9} {'p90 ms':>9} {'p99 ms':>9}"
    )
    rows = [
        f"{r.concurrency:>11} {r.requests:>9} {r.errors:>7} {r.throughput_rps:>9.1f} "
        f"{r.mean_ms:>9.2f} {r.p50_ms:>9.2f} {r.p90_ms:>9.2f} {r.p99_ms:>9.2f}"
        for r in results
    ]
    notes = [f"  c={r.concurrency}: {sample}" for r in results for sample in r.error_samples]
    return "\n".join([header, *rows, *notes])


def parse_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``NAME:1x3x640x640`` -> ``("NAME", (1, 3, 640, 640))``; the name may hold ``:``
    (the last one separates).

    Raises:
        UsageError: no ``:``, or a dim that is not a positive integer.
    """
    name, sep, dims = text.rpartition(":")
    try:
        shape = tuple(int(dim) for dim in dims.split("x"))
    except ValueError:
        shape = ()
    if not sep or not name or not shape or min(shape) <= 0:
        raise UsageError(f"--shape {text!r}: write INPUT:DIMS, e.g. x:1x3x640x640")
    return name, shape


async def _inputs(client: Any, request: BenchRequest) -> list[InferInput]:
    try:
        metadata = await client.get_model_metadata(request.model, request.model_version)
    except InferenceServerException as exc:
        raise MmaasError(
            f"cannot get model {request.model!r} from {request.url}: "
            f"{exc.message()}; is the server running and serving it?"
        ) from None
    unknown = set(request.shapes) - {t.name for t in metadata.inputs}
    if unknown:
        raise UsageError(
            f"--shape names no input of {request.model!r}: {', '.join(sorted(unknown))}"
        )
    tensors = tuple(
        _tensor(t.name, t.datatype, tuple(t.shape), request.shapes) for t in metadata.inputs
    )
    info = ModelInfo(
        name=request.model,
        version="",
        backend="",
        precision="",
        max_batch_size=0,
        inputs=tensors,
        outputs=(),
    )
    arrays = sample_inputs(info, "opt")
    inputs = []
    for tensor in tensors:
        infer_input = InferInput(tensor.name, list(tensor.opt or ()), tensor.datatype)
        infer_input.set_data_from_numpy(arrays[tensor.name])
        inputs.append(infer_input)
    return inputs


def _tensor(
    name: str, datatype: str, declared: tuple[int, ...], shapes: Mapping[str, tuple[int, ...]]
) -> TensorInfo:
    shape = shapes.get(name, declared)
    if any(dim < 0 for dim in shape):
        raise UsageError(
            f"input {name!r} has dynamic dims {list(declared)}: give its shape, "
            f"e.g. --shape {name}:{'x'.join(str(max(d, 1)) for d in declared)}"
        )
    return TensorInfo(name=name, datatype=datatype, shape=shape, opt=shape)


async def _level(
    client: Any, request: BenchRequest, inputs: list[InferInput], concurrency: int
) -> LevelResult:
    async def call(index: int) -> None:
        try:
            await client.infer(request.model, inputs, model_version=request.model_version)
        except InferenceServerException as exc:
            raise CallFailed(f"{exc.status()}: {exc.message()[:120]}") from None

    return await closed_loop(call, concurrency, request.duration_s, request.max_requests)


class CallFailed(Exception):
    """One request of a closed loop failed; the message is what the summary counts."""


async def closed_loop(
    call: Callable[[int], Awaitable[None]],
    concurrency: int,
    duration_s: float,
    max_requests: int | None = None,
) -> LevelResult:
    """``concurrency`` clients (``call(client_index)``), each sending its next request as
    soon as the last is answered, for ``duration_s`` seconds or ``max_requests`` requests;
    a :class:`CallFailed` counts as an error, not a latency."""
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    budget = [max_requests if max_requests is not None else -1]
    loop = asyncio.get_running_loop()
    stop_at = loop.time() + duration_s

    async def client_loop(index: int) -> None:
        while loop.time() < stop_at and budget[0] != 0:
            budget[0] -= 1
            started = time.perf_counter()
            try:
                await call(index)
            except CallFailed as exc:
                errors[str(exc)] += 1
                continue
            latencies.append((time.perf_counter() - started) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*(client_loop(index) for index in range(concurrency)))
    elapsed = time.perf_counter() - started
    values = np.array(latencies) if latencies else np.array([float("nan")])
    p50, p90, p99 = (float(np.percentile(values, q)) for q in PERCENTILES)
    return LevelResult(
        concurrency=concurrency,
        requests=len(latencies),
        errors=sum(errors.values()),
        duration_s=round(elapsed, 3),
        throughput_rps=len(latencies) / elapsed,
        mean_ms=float(values.mean()),
        p50_ms=p50,
        p90_ms=p90,
        p99_ms=p99,
        error_samples=tuple(message for message, _ in errors.most_common(3)),
    )
