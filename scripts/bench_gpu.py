"""GPU benchmark (run on a GPU host, e.g. the H200): raw ONNX Runtime CUDA against the mmaas
runtime through gRPC, in one run, for ppocr-det 1x3x640x640 and the qwen-vl vision encoder
at its opt shape (1024 patches, one image).

    python scripts/bench_gpu.py MODELS_DIR --out benchmarks/results/gpu-h200.json

MODELS_DIR holds the GPU variants of scripts/gpu_models.py (``ppocr-det/``, ``qwen-vl/``),
compiled by ``mmaas serve`` (scripts/gpu_serve_check.py runs first in scripts/gpu_run.sh).

(a) raw, the floor: the same engine file in one ``InferenceSession`` with the same CUDA
provider options as mmaas (``use_tf32=0``, cuDNN EXHAUSTIVE, level ``all`` at load), one
thread, p50/p99 over ``--runs`` runs after warm-up: ``run_with_iobinding`` with inputs and
outputs pre-allocated on the device (``device``: compute only), the same with a CUDA graph
(``device_graph``), host arrays in and out through I/O binding (``host``: one copy each
way, what a server has to do at least) and its CUDA-graph form (``host_graph``).
(b) mmaas: ``mmaas serve`` with each configuration (CUDA graphs on/off via
``MMAAS_CUDA_GRAPHS``; dynamic batching via ``MMAAS_DYNAMIC_BATCHING``; instances via
``MMAAS_INSTANCE_COUNT``), measured by mmaas's closed-loop tritonclient load generator
(``mmaas.bench.load``, as ``mmaas bench``) from the same host at concurrency 1, 8 and 32:
p50/p99 client latency and throughput. Ratios are taken within this run. The JSON records
the GPU name, UUID and driver (NVML), ONNX Runtime's version and the host's load.
(a) is scripts/bench_gpu_raw.py, (b) and what is measured scripts/bench_gpu_served.py.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

import onnxruntime as ort

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.bench_gpu_raw import raw  # noqa: E402
from scripts.bench_gpu_served import CONFIGS, SHAPES, feeds, served  # noqa: E402


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


def ratios(record: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets: ppocr-det mmaas p50 at c=1 against raw, throughput at c=32 with
    dynamic batching against c=1."""
    out: dict[str, Any] = {}
    for name, data in record["models"].items():
        raw_floor, cfgs = data["raw"], data["mmaas"]
        for cfg in cfgs:
            one = _at(cfgs[cfg], 1)
            if one is None:
                continue
            key = "host_graph" if "graphs" in cfg else "host"
            out[f"{name} {cfg}: p50 c=1 / raw {key} p50"] = round(
                one["p50_ms"] / raw_floor[key]["p50_ms"], 3
            )
            out[f"{name} {cfg}: p50 c=1 / raw device p50"] = round(
                one["p50_ms"] / raw_floor["device"]["p50_ms"], 3
            )
            top = _at(cfgs[cfg], 32)
            if top is not None:
                out[f"{name} {cfg}: throughput c=32 / c=1"] = round(
                    top["throughput_rps"] / one["throughput_rps"], 3
                )
    return out


def _at(result: dict[str, Any], concurrency: int) -> dict[str, Any] | None:
    return next((lv for lv in result.get("levels", []) if lv["concurrency"] == concurrency), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per concurrency level")
    parser.add_argument("--runs", type=int, default=300, help="raw runs per path")
    parser.add_argument("--only", nargs="*", default=list(SHAPES))
    args = parser.parse_args()
    work = Path("/tmp/mmaas-gpu-bench")
    work.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {
        "benchmark": "bench_gpu",
        "gpu": gpu_facts(),
        "onnxruntime": ort.__version__,
        "host": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average": os.getloadavg(),
        },
        "settings": {"duration_s": args.duration, "raw_runs": args.runs, "concurrency": [1, 8, 32]},
        "models": {},
    }
    for name in args.only:
        folder = args.models / name
        engine = folder / ".mmaas/engine/model.ort.onnx"
        data: dict[str, Any] = {"shapes": {k: list(v) for k, v in SHAPES[name].items()}}
        data["raw"] = raw(engine, feeds(name), args.runs)
        data["mmaas"] = {
            cfg: served(folder, name, env, args.duration, work)
            for cfg, env in CONFIGS[name].items()
        }
        record["models"][name] = data
        print(json.dumps({name: data["raw"]}, indent=1), flush=True)
        record["ratios"] = ratios(record)
        record["host"]["load_average_after"] = os.getloadavg()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=2) + "\n")  # after each model
    for key, value in record["ratios"].items():
        print(f"{key:<70} {value}")
    for name, data in record["models"].items():
        for cfg, result in data["mmaas"].items():
            for lv in result.get("levels", []):
                print(
                    f"{name:<10} {cfg:<20} c={lv['concurrency']:<3} p50 {lv['p50_ms']:.3f} ms  "
                    f"p99 {lv['p99_ms']:.3f} ms  {lv['throughput_rps']:.1f}/s  "
                    f"errors {lv['errors']}"
                )
            if "error" in result:
                print(f"{name:<10} {cfg:<20} ERROR {result['error'][:300]}")


if __name__ == "__main__":
    main()
