"""Measurements scripts/bench_runtime.py takes: the raw engine in-process (the floor), the
c=1 overhead paired block by block with a server, and a started server's levels over
gRPC (``mmaas.bench.load``) and HTTP/REST (``mmaas.bench.rest``)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import tritonclient.grpc as triton

from bench_servers import Server
from mmaas.backends import get_runtime
from mmaas.bench import rest
from mmaas.bench.load import BenchRequest, LevelResult, run
from mmaas.core.manifest import read_manifest
from mmaas.core.samples import sample_inputs

PAIR_BLOCKS = 5


@dataclass(frozen=True)
class RawEngine:
    """The floor: the served engine, loaded in-process by the same back end with the same
    thread count, and its inputs at the case's shape."""

    engine: Any
    inputs: dict[str, np.ndarray]
    outputs: list[str]
    datatypes: dict[str, str]

    @classmethod
    def load(cls, model_dir: Path, shape: tuple[int, ...]) -> RawEngine:
        manifest = read_manifest(model_dir)
        info = manifest.model
        engine = get_runtime(info.backend).load(model_dir, manifest, os.cpu_count() or 1)
        at_shape = replace(info, inputs=tuple(replace(t, opt=shape) for t in info.inputs))
        datatypes = {t.name: t.datatype for t in info.inputs}
        outputs = [t.name for t in info.outputs]
        raw = cls(engine, sample_inputs(at_shape, "opt"), outputs, datatypes)
        for _ in range(3):
            raw.call()
        return raw

    def output_sizes(self) -> dict[str, int]:
        """Bytes of each output at the case's shape (the shared memory regions' sizes)."""
        return {n: a.nbytes for n, a in self.engine.infer(self.inputs, self.outputs).items()}

    def call(self) -> float:
        """One ``infer``; its latency in ms."""
        started = time.perf_counter()
        self.engine.infer(self.inputs, self.outputs)
        return (time.perf_counter() - started) * 1000


def summary(latencies: list[float]) -> dict[str, Any]:
    values = np.array(latencies)
    return {
        "requests": len(latencies),
        "mean_ms": float(values.mean()),
        "p50_ms": float(np.percentile(values, 50)),
        "p99_ms": float(np.percentile(values, 99)),
    }


def raw_latency(raw: RawEngine, duration: float) -> dict[str, Any]:
    """In-process ``infer`` in a loop for ``duration`` seconds (concurrency 1)."""
    stop_at = time.monotonic() + duration
    latencies = []
    while time.monotonic() < stop_at:
        latencies.append(raw.call())
    return summary(latencies)


def grpc_call(url: str, model: str, raw: RawEngine) -> Callable[[], float]:
    """One gRPC ModelInfer of the raw engine's inputs (tritonclient.grpc); latency in ms."""
    client = triton.InferenceServerClient(url)
    inputs = []
    for name, array in raw.inputs.items():
        tensor = triton.InferInput(name, list(array.shape), raw.datatypes[name])
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)

    def served() -> float:
        started = time.perf_counter()
        client.infer(model, inputs)
        return (time.perf_counter() - started) * 1000

    return served


def paired_c1(
    raw: RawEngine, served: Callable[[], float], url: str, model: str, duration: float
) -> dict[str, Any]:
    """Raw ``infer`` and ``served`` requests (concurrency 1) in alternating blocks of
    back-to-back calls, :data:`PAIR_BLOCKS` of each over ``duration`` seconds, so that both
    see the same drift of machine load (this machine is shared): the c=1 overhead ratio."""
    client = triton.InferenceServerClient(url)
    raw_ms: list[float] = []
    served_ms: list[float] = []
    block_s = duration / PAIR_BLOCKS / 2
    before = client.get_inference_statistics(model).model_stats[0].inference_stats
    for _ in range(PAIR_BLOCKS):
        for call, into in ((raw.call, raw_ms), (served, served_ms)):
            call()  # first call after the other side ran: wake-up, not measured
            stop_at = time.monotonic() + block_s
            while time.monotonic() < stop_at:
                into.append(call())
    after = client.get_inference_statistics(model).model_stats[0].inference_stats
    raw_s, served_s = summary(raw_ms), summary(served_ms)
    count = after.success.count - before.success.count
    return {
        "raw": raw_s,
        "mmaas": served_s,
        "mmaas_over_raw_p50": served_s["p50_ms"] / raw_s["p50_ms"],
        # the server's own statistics (ModelStatistics), mean ms per request
        "server_request_mean_ms": (after.success.ns - before.success.ns) / count / 1e6,
        "server_engine_mean_ms": (after.compute_infer.ns - before.compute_infer.ns) / count / 1e6,
    }


def measure_server(
    server: Server, model: str, raw: RawEngine, levels: tuple[int, ...], duration: float
) -> dict[str, Any]:
    """The gRPC levels of a started server (``mmaas.bench.load``)."""
    shape = next(iter(raw.inputs.values())).shape
    results = run(
        BenchRequest(
            url=server.url,
            model=model,
            shapes={name: a.shape for name, a in raw.inputs.items()} or {"x": shape},
            concurrency=levels,
            duration_s=duration,
            warmup_requests=10,
        )
    )
    return _levels(results)


def measure_rest(
    server: Server, model: str, body: rest.Body, levels: tuple[int, ...], duration: float
) -> dict[str, Any]:
    """The HTTP levels of a started server, every client posting ``body``."""
    results = rest.measure(server.infer_url(model), lambda _: body, levels, duration)
    return _levels(results)


def _levels(results: list[LevelResult]) -> dict[str, Any]:
    return {"levels": {str(r.concurrency): asdict(r) for r in results}}


def started(server: Server, model: str) -> dict[str, Any]:
    """Wait for ``server``; its ready time (spawn to ModelReady, and its own log line)."""
    ready_s = server.wait_ready(model)
    log = server.log.read_text(errors="replace")
    after_start = re.search(r"\(([\d.]+) s after process start\)", log)
    return {
        "ready_s": round(ready_s, 3),
        "ready_after_process_start_s": float(after_start.group(1)) if after_start else None,
    }
