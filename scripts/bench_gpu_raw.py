"""The raw floors of scripts/bench_gpu.py: the engine file in one ONNX Runtime
``InferenceSession`` with mmaas's CUDA provider options, timed through I/O binding with
device-resident inputs and outputs (``device``, ``device_graph``), host arrays in and out
(``host``, ``host_graph``) and plain ``session.run`` (``session_run``); and
:func:`shape_change`, the cost of a session that changes batch size from run to run (the
stall of dynamic batching without graphs) against one session per batch size."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from mmaas.backends.onnxruntime.runtime.providers import cuda_options
from mmaas.backends.onnxruntime.runtime.settings import GpuSettings


def timed(call: Any, runs: int, warmup: int = 20) -> dict[str, float]:
    """p50/p99/mean in ms of ``call()`` over ``runs`` runs after ``warmup``."""
    for _ in range(warmup):
        call()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    ms = np.array(times)
    return {
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "mean_ms": float(ms.mean()),
        "throughput_per_s": float(1000 / ms.mean()),
    }


def raw(engine: Path, arrays: dict[str, np.ndarray], runs: int) -> dict[str, Any]:
    """The raw floors (module doc): without and with a CUDA graph."""
    return {**_raw_paths(engine, arrays, runs, False), **_raw_paths(engine, arrays, runs, True)}


def _session(engine: Path, graph: bool) -> ort.InferenceSession:
    gpu = GpuSettings("cuda", False, (), "exhaustive", False)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    return ort.InferenceSession(
        str(engine),
        options,
        providers=[
            ("CUDAExecutionProvider", cuda_options(gpu, "fp32", graphs=graph)),
            "CPUExecutionProvider",
        ],
    )


def _raw_paths(
    engine: Path, arrays: dict[str, np.ndarray], runs: int, graph: bool
) -> dict[str, Any]:
    session = _session(engine, graph)
    names = [o.name for o in session.get_outputs()]
    first = session.run(names, arrays)
    device_in = {n: ort.OrtValue.ortvalue_from_numpy(a, "cuda", 0) for n, a in arrays.items()}
    device_out = {
        n: ort.OrtValue.ortvalue_from_shape_and_type(v.shape, v.dtype, "cuda", 0)
        for n, v in zip(names, first, strict=True)
    }
    binding = session.io_binding()
    for n, v in device_in.items():
        binding.bind_ortvalue_input(n, v)
    for n, v in device_out.items():
        binding.bind_ortvalue_output(n, v)

    def host_path() -> None:  # the graph's request path: copy in, replay, copy out
        for n, a in arrays.items():
            device_in[n].update_inplace(a)
        session.run_with_iobinding(binding)
        for v in device_out.values():
            v.numpy()

    def host_plain() -> None:  # host arrays through I/O binding, ORT allocating the outputs
        b = session.io_binding()
        for n, a in arrays.items():
            b.bind_cpu_input(n, a)
        for n in names:
            b.bind_output(n, "cpu")
        session.run_with_iobinding(b)
        b.copy_outputs_to_cpu()

    device = timed(lambda: session.run_with_iobinding(binding), runs)
    if graph:
        return {"device_graph": device, "host_graph": timed(host_path, runs)}
    return {
        "device": device,
        "host": timed(host_plain, runs),
        "session_run": timed(lambda: session.run(names, arrays), runs),
    }


def shape_change(engine: Path, arrays: dict[str, np.ndarray], runs: int) -> dict[str, Any]:
    """ms per run of ``session.run`` (no graph) at batch 1 alone, 2 alone, alternating 1
    and 2 on one session, and alternating on two sessions, one per batch size."""
    one = arrays
    two = {n: np.concatenate([a, a]) for n, a in arrays.items()}
    first, second = _session(engine, False), _session(engine, False)
    names = [o.name for o in first.get_outputs()]
    turn = {"i": 0}

    def alternate(a: ort.InferenceSession, b: ort.InferenceSession) -> None:
        turn["i"] += 1
        if turn["i"] % 2:
            a.run(names, one)
        else:
            b.run(names, two)

    return {
        "batch1_ms": timed(lambda: first.run(names, one), runs)["mean_ms"],
        "batch2_ms": timed(lambda: second.run(names, two), runs)["mean_ms"],
        "alternating_one_session_ms": timed(lambda: alternate(first, first), runs)["mean_ms"],
        "alternating_two_sessions_ms": timed(lambda: alternate(first, second), runs)["mean_ms"],
    }
