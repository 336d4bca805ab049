"""``mmaas bench``: a closed-loop load generator for any KServe v2 gRPC server (mmaas,
Triton, MLServer), in the manner of Triton's perf_analyzer (not available here).

For each concurrency level, ``concurrency`` clients (``tritonclient.grpc.aio``, one
channel) each send a request, wait for its answer and send the next, for ``duration_s``
seconds (or ``max_requests`` requests) after ``warmup_requests`` unmeasured ones.
Inputs, with the datatypes and shapes the server's ModelMetadata declares (``shapes`` for
dynamic dims): the requests of an ``input_data`` file in perf_analyzer's format
(:mod:`mmaas.bench.input_data`, cycled), else one request of deterministic sample data
(:func:`mmaas.core.samples.sample_inputs`) made of each input's ``sample_values`` when the
server publishes them (an mmaas server's ModelConfig ``parameters``: an input whose values
the model branches on, such as silero-vad's sample rate, gets values it takes), else
random. Latencies are client-side, in ms; throughput is answered requests per second.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tritonclient.grpc.aio as triton_aio
from tritonclient.grpc import InferInput
from tritonclient.utils import InferenceServerException

from mmaas.bench.input_data import read_input_data
from mmaas.core.errors import MmaasError, UsageError
from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.core.sample_values import CONFIG_PARAMETER, SampleValues
from mmaas.core.samples import sample_inputs

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class BenchRequest:
    """What to measure. ``url`` is ``host:port``; ``shapes`` gives each input with a
    dynamic dim its full shape (static inputs default to their declared shape);
    ``duration_s`` and ``max_requests`` bound each level (whichever ends first);
    ``input_data``: a perf_analyzer ``--input-data`` JSON file (None: sample data)."""

    url: str
    model: str
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    concurrency: tuple[int, ...] = (1,)
    duration_s: float = 10.0
    max_requests: int | None = None
    warmup_requests: int = 5
    model_version: str = ""
    input_data: Path | None = None


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
        steps = await _requests(client, request)
        for index in range(request.warmup_requests):
            inputs = steps[index % len(steps)]
            await client.infer(request.model, inputs, model_version=request.model_version)
        return [await _level(client, request, steps, level) for level in request.concurrency]
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


async def _requests(client: Any, request: BenchRequest) -> list[list[InferInput]]:
    """Every distinct request's inputs (one, or each entry of the input data file)."""
    try:
        metadata = await client.get_model_metadata(request.model, request.model_version)
        config = await client.get_model_config(request.model, request.model_version)
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
    published = config.config.parameters.get(CONFIG_PARAMETER)
    samples = json.loads(published.string_value) if published is not None else {}
    if request.input_data is not None:
        declared = [
            TensorInfo(t.name, t.datatype, tuple(request.shapes.get(t.name, t.shape)))
            for t in metadata.inputs
        ]
        steps = read_input_data(request.input_data, declared)
    else:
        tensors = tuple(
            _tensor(t.name, t.datatype, tuple(t.shape), request.shapes, samples.get(t.name))
            for t in metadata.inputs
        )
        info = ModelInfo(request.model, "", "", "", 0, tensors, ())
        steps = [sample_inputs(info, "opt")]
    return [[_infer_input(name, array, metadata) for name, array in s.items()] for s in steps]


def _infer_input(name: str, array: np.ndarray, metadata: Any) -> InferInput:
    datatype = next(t.datatype for t in metadata.inputs if t.name == name)
    tensor = InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(array)
    return tensor


def _tensor(
    name: str,
    datatype: str,
    declared: tuple[int, ...],
    shapes: Mapping[str, tuple[int, ...]],
    samples: dict[str, Any] | None,
) -> TensorInfo:
    shape = shapes.get(name, declared)
    if any(dim < 0 for dim in shape):
        raise UsageError(
            f"input {name!r} has dynamic dims {list(declared)}: give its shape, "
            f"e.g. --shape {name}:{'x'.join(str(max(d, 1)) for d in declared)}"
        )
    values = SampleValues.from_json(samples)
    return TensorInfo(name=name, datatype=datatype, shape=shape, opt=shape, sample_values=values)


async def _level(
    client: Any, request: BenchRequest, steps: list[list[InferInput]], concurrency: int
) -> LevelResult:
    sent = [0]

    async def call(index: int) -> None:
        inputs = steps[sent[0] % len(steps)]
        sent[0] += 1
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
