"""The mmaas half of scripts/bench_gpu.py: ``mmaas serve`` of the ppocr-det GPU variant in
each server configuration (environment overrides), loaded by perf_analyzer (Triton's C++
load tool: the client costs little next to the server) over gRPC, its inputs and outputs
in no shared memory (raw bytes in the messages), system or CUDA shared memory, at the
concurrencies of :data:`RUNS`; with the server-side means perf_analyzer reads back and
the server's own counters (rows per execution, GPU memory)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

from scripts.gpu_serve_check import Server
from scripts.perf_analyzer_output import figures

SHAPE = (1, 3, 640, 640)
OUTPUT_BYTES = 640 * 640 * 4
CONFIGS = {  # name -> environment; 2 instances where batching feeds two executions
    "graphs": {"MMAAS_CUDA_GRAPHS": "true", "MMAAS_DYNAMIC_BATCHING": "false"},
    "plain": {"MMAAS_CUDA_GRAPHS": "false", "MMAAS_DYNAMIC_BATCHING": "false"},
    "batching+graphs": {
        "MMAAS_CUDA_GRAPHS": "true",
        "MMAAS_DYNAMIC_BATCHING": "true",
        "MMAAS_INSTANCE_COUNT": "2",
    },
    "batching": {
        "MMAAS_CUDA_GRAPHS": "false",
        "MMAAS_DYNAMIC_BATCHING": "true",
        "MMAAS_INSTANCE_COUNT": "2",
    },
}
RUNS = {  # name -> (shared memory, concurrency) measured
    "graphs": [("none", 1), ("system", 1), ("cuda", 1)],
    "plain": [("cuda", 1)],
    "batching+graphs": [("cuda", 1), ("cuda", 8), ("cuda", 32), ("none", 1), ("none", 32)],
    "batching": [("cuda", 1), ("cuda", 8), ("cuda", 32)],
}


def perf_analyzer(grpc: int, shared: str, level: int, window_ms: int) -> dict[str, Any]:
    """One perf_analyzer run at concurrency ``level`` (time windows, stability off: the
    figures of the last of 3 windows)."""
    argv = [
        os.environ.get("MMAAS_PERF_ANALYZER", "perf_analyzer"),
        "-m", "ppocr-det", "-i", "grpc", "-u", f"127.0.0.1:{grpc}",
        "-b", "1", "--shape", "x:" + ",".join(map(str, SHAPE[1:])),
        "--concurrency-range", str(level), "-p", str(window_ms),
        "--max-trials", "3", "--stability-percentage", "999",
        "--shared-memory", shared, "--output-shared-memory-size", str(OUTPUT_BYTES),
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        return {"error": (done.stdout + done.stderr)[-1500:]}
    return figures(done.stdout)


def served(folder: Path, env: dict[str, str], runs: list[tuple[str, int]], window_ms: int,
           work: Path) -> dict[str, Any]:  # fmt: skip
    """One configuration: its runs, its start-up time and server-side counters."""
    server = Server(folder, work / f"bench-{time.time_ns()}.log", env)
    try:
        ready = server.wait_ready()
        measured = {f"{shared} c={level}": perf_analyzer(server.grpc, shared, level, window_ms)
                    for shared, level in runs}  # fmt: skip
        return {"env": env, "ready_s": round(ready, 2), "runs": measured,
                "server_side": server_side(server.metrics_text())}  # fmt: skip
    except Exception as exc:  # recorded; the other configurations still run
        return {"env": env, "error": str(exc), "log": server.tail(30)}
    finally:
        server.stop()


def server_side(text: str) -> dict[str, float]:
    """Per-request server means from Triton's counters (every run of the configuration):
    request, queue, compute input/infer/output in ms, rows per execution, GPU memory."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("nv_") and "{" in line:
            name = line.split("{", 1)[0]
            values[name] = values.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    requests = values.get("nv_inference_request_success", 0.0) or 1.0
    runs = values.get("nv_inference_exec_count", 0.0) or 1.0
    parts = ("request", "queue", "compute_input", "compute_infer", "compute_output")
    out = {
        f"{part}_ms_per_request": values.get(f"nv_inference_{part}_duration_us", 0.0)
        / 1000
        / requests
        for part in parts
    }
    out["rows_per_execution"] = values.get("nv_inference_count", 0.0) / runs
    out["gpu_memory_used_bytes"] = values.get("nv_gpu_memory_used_bytes", 0.0)
    return out
