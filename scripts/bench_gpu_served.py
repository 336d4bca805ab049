"""What scripts/bench_gpu.py measures and the mmaas half of it: the models' input shapes,
the server configurations (environment overrides) of each, and one ``mmaas serve`` per
configuration loaded by mmaas's closed-loop load generator at concurrency 1, 8 and 32, with
the server-side means read from its Triton counters."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from mmaas.bench.load import BenchRequest, LevelResult, run
from scripts.gpu_serve_check import Server

SHAPES = {
    "ppocr-det": {"x": (1, 3, 640, 640)},
    "qwen-vl": {"pixel_values": (1024, 1176), "grid_thw": (1, 3)},
}
CONFIGS = {  # name -> (env overrides); instances 2 where batching feeds two executions
    "ppocr-det": {
        "plain": {"MMAAS_CUDA_GRAPHS": "false", "MMAAS_DYNAMIC_BATCHING": "false"},
        "graphs": {"MMAAS_CUDA_GRAPHS": "true", "MMAAS_DYNAMIC_BATCHING": "false"},
        "batching": {
            "MMAAS_CUDA_GRAPHS": "false",
            "MMAAS_DYNAMIC_BATCHING": "true",
            "MMAAS_INSTANCE_COUNT": "2",
        },
        "batching+graphs": {
            "MMAAS_CUDA_GRAPHS": "true",
            "MMAAS_DYNAMIC_BATCHING": "true",
            "MMAAS_INSTANCE_COUNT": "2",
        },
    },
    "qwen-vl": {  # no batch axis: no dynamic batching
        "plain": {"MMAAS_CUDA_GRAPHS": "false"},
        "graphs": {"MMAAS_CUDA_GRAPHS": "true"},
        "graphs x2 instances": {"MMAAS_CUDA_GRAPHS": "true", "MMAAS_INSTANCE_COUNT": "2"},
    },
}


def feeds(name: str) -> dict[str, np.ndarray]:
    """The benchmark's input at the measured shape."""
    rng = np.random.default_rng(0)
    arrays = {
        n: rng.random(s, dtype=np.float32) for n, s in SHAPES[name].items() if n != "grid_thw"
    }
    if name == "qwen-vl":
        arrays["grid_thw"] = np.array([[1, 32, 32]], np.int64)
    return arrays


def served(
    folder: Path, name: str, env: dict[str, str], duration: float, work: Path
) -> dict[str, Any]:
    """One mmaas configuration at concurrency 1, 8, 32."""
    server = Server(folder, work / f"bench-{name}-{len(env)}-{time.time_ns()}.log", env)
    try:
        ready = server.wait_ready()
        request = BenchRequest(
            url=f"127.0.0.1:{server.grpc}",
            model=name,
            shapes=SHAPES[name],
            concurrency=(1, 8, 32),
            duration_s=duration,
            warmup_requests=20,
        )
        levels: list[LevelResult] = run(request)
        return {
            "env": env,
            "ready_s": round(ready, 2),
            "levels": [_level(level) for level in levels],
            "server_side": server_side(server.metrics_text()),
        }
    except Exception as exc:  # recorded; the other configurations still run
        return {"env": env, "error": str(exc)}
    finally:
        server.stop()


def server_side(text: str) -> dict[str, float]:
    """Per-request server means from Triton's counters (all levels together): request,
    queue, compute input/infer/output durations in ms, rows per execution, GPU memory."""
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


def _level(level: LevelResult) -> dict[str, Any]:
    data = {k: v for k, v in level.__dict__.items() if not k.startswith("_")}
    return json.loads(json.dumps(data, default=str))
