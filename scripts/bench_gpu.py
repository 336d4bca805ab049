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
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mmaas.backends.onnxruntime.runtime.providers import cuda_options  # noqa: E402
from mmaas.backends.onnxruntime.runtime.settings import GpuSettings  # noqa: E402
from mmaas.bench.load import BenchRequest, LevelResult, run  # noqa: E402
from scripts.gpu_serve_check import Server  # noqa: E402

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


def _raw_paths(
    engine: Path, arrays: dict[str, np.ndarray], runs: int, graph: bool
) -> dict[str, Any]:
    gpu = GpuSettings("cuda", False, (), "exhaustive", False)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    session = ort.InferenceSession(
        str(engine),
        options,
        providers=[
            ("CUDAExecutionProvider", cuda_options(gpu, "fp32", graphs=graph)),
            "CPUExecutionProvider",
        ],
    )
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
