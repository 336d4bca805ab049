"""GPU benchmark (run on a GPU host, e.g. the H200), one run: raw ONNX Runtime CUDA against
the mmaas server, for ppocr-det 1x3x640x640.

    python scripts/bench_gpu.py MODELS_DIR --out benchmarks/results/gpu-h200-<UTC>.json

MODELS_DIR holds the GPU variants of scripts/gpu_models.py (``ppocr-det/``: max batch 8,
preferred 4 and 8, CUDA graphs at batch 1, 4, 8), compiled (scripts/gpu_run.sh's check).

(a) raw, the floor (scripts/bench_gpu_raw.py): the same engine file in one
``InferenceSession`` with mmaas's CUDA provider options, one thread: ``run_with_iobinding``
with inputs and outputs resident on the device (``device``; ``device_graph`` with a CUDA
graph) — what a client whose tensors already live on the GPU gets at best, the
comparison for CUDA shared memory — and with host arrays (``host``, ``host_graph``).
(b) the shape-change probe: a session alternating batch 1 and 2 against two sessions of
one batch size each (what pins a session per shape in mmaas).
(c) mmaas (scripts/bench_gpu_served.py): ``mmaas serve`` per configuration, perf_analyzer
over gRPC with no, system or CUDA shared memory at concurrency 1, 8, 32.

``summary`` holds the issue's figures and what they divide: CUDA shared memory p50 at
concurrency 1 over raw I/O binding with device-resident tensors (with CUDA graphs on both
sides; and without on both), throughput at 32 over 1 with dynamic batching and CUDA shared
memory, with graphs and without. The JSON records the GPU (NVML), ONNX Runtime, the load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.bench_gpu_raw import raw, shape_change  # noqa: E402
from scripts.bench_gpu_served import CONFIGS, RUNS, SHAPE, served  # noqa: E402

GOALS = {  # summary key -> (bound, "max" or "min")
    "cuda_shm_over_raw_p50_c1": (1.2, "max"),
    "batched_c32_over_c1_throughput": (3.0, "min"),
    "no_graphs_batched_c32_over_c1_throughput": (2.0, "min"),
}


def gpu_facts() -> dict[str, Any]:
    """NVML: name, UUID, driver, CUDA driver version, memory."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        text = lambda v: v.decode() if isinstance(v, bytes) else str(v)  # noqa: E731
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        return {
            "name": text(pynvml.nvmlDeviceGetName(handle)),
            "uuid": text(pynvml.nvmlDeviceGetUUID(handle)),
            "driver": text(pynvml.nvmlSystemGetDriverVersion()),
            "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}",
            "memory_total_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(handle).total),
        }
    except Exception as exc:  # no NVML
        return {"error": str(exc)}


def summary(record: dict[str, Any]) -> dict[str, Any]:
    """The issue's figures, each with the raw figures it divides (module doc)."""
    floor, mmaas = record["raw"], record["mmaas"]

    def run(config: str, key: str, figure: str) -> float | None:
        value = mmaas.get(config, {}).get("runs", {}).get(key, {}).get(figure)
        return None if value is None else float(value)

    def ratio(top: float | None, bottom: float | None) -> float | None:
        return None if top is None or not bottom else round(top / bottom, 3)

    shm_graph = run("graphs", "cuda c=1", "p50_us")
    shm_plain = run("plain", "cuda c=1", "p50_us")
    out: dict[str, Any] = {
        "cuda_shm_p50_c1_ms": shm_graph and shm_graph / 1000,
        "raw_iobinding_device_graph_p50_ms": floor["device_graph"]["p50_ms"],
        "cuda_shm_over_raw_p50_c1": ratio(
            shm_graph and shm_graph / 1000, floor["device_graph"]["p50_ms"]
        ),
        "no_graphs_cuda_shm_p50_c1_ms": shm_plain and shm_plain / 1000,
        "raw_iobinding_device_p50_ms": floor["device"]["p50_ms"],
        "no_graphs_cuda_shm_over_raw_p50_c1": ratio(
            shm_plain and shm_plain / 1000, floor["device"]["p50_ms"]
        ),
    }
    for prefix, config in (("", "batching+graphs"), ("no_graphs_", "batching")):
        one, top = run(config, "cuda c=1", "throughput"), run(config, "cuda c=32", "throughput")
        out[f"{prefix}batched_c1_throughput"] = one
        out[f"{prefix}batched_c32_throughput"] = top
        out[f"{prefix}batched_c32_over_c1_throughput"] = ratio(top, one)
    out["goals_met"] = {key: _met(out[key], *goal) for key, goal in GOALS.items()}
    return out


def _met(value: float | None, bound: float, kind: str) -> bool | None:
    if value is None:
        return None
    return value <= bound if kind == "max" else value >= bound


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--window-ms", type=int, default=2000, help="perf_analyzer window")
    parser.add_argument("--runs", type=int, default=300, help="raw runs per path")
    parser.add_argument("--configs", nargs="*", default=list(CONFIGS))
    args = parser.parse_args()
    work = Path("/tmp/mmaas-gpu-bench")
    work.mkdir(parents=True, exist_ok=True)
    folder = args.models / "ppocr-det"
    engine = folder / ".mmaas/engine/model.ort.onnx"
    feeds = {"x": np.random.default_rng(0).random(SHAPE, dtype=np.float32)}
    record: dict[str, Any] = {
        "benchmark": "bench_gpu",
        "model": "ppocr-det",
        "shape": list(SHAPE),
        "gpu": gpu_facts(),
        "onnxruntime": ort.__version__,
        "host": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average": os.getloadavg(),
        },
        "settings": {"window_ms": args.window_ms, "raw_runs": args.runs, "runs": RUNS},
        "raw": raw(engine, feeds, args.runs),
        "shape_change": shape_change(engine, feeds, args.runs // 3),
        "mmaas": {},
    }
    print(json.dumps({"raw": record["raw"], "shape_change": record["shape_change"]}), flush=True)
    for config in args.configs:
        record["mmaas"][config] = served(
            folder, CONFIGS[config], RUNS[config], args.window_ms, work
        )
        record["summary"] = summary(record)
        record["host"]["load_average_after"] = os.getloadavg()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=2) + "\n")  # after each configuration
    for config, result in record["mmaas"].items():
        for key, run in result.get("runs", {}).items():
            if "error" in run:
                print(f"{config:<16} {key:<12} ERROR {run['error'][-300:]}")
                continue
            p50, p99 = (run["p50_us"] or 0) / 1000, (run["p99_us"] or 0) / 1000
            print(f"{config:<16} {key:<12} p50 {p50:7.3f} ms  p99 {p99:7.3f} ms  "
                  f"{run['throughput'] or 0:8.1f}/s")  # fmt: skip
        if "error" in result:
            print(f"{config:<16} ERROR {result['error'][:300]}")
    for key, value in record["summary"].items():
        print(f"{key:<44} {value}")


if __name__ == "__main__":
    main()
