"""Runtime overhead benchmark (issues 4 and 12): in one run, on the same machine and inputs,
measure (a) in-process ONNX Runtime on the served engine, the floor (for the c=1 overhead
ratios alternated block by block with the server, so both see the same load); (b) the
mmaas runtime (``python -m mmaas.server``) over gRPC, over HTTP/REST with JSON tensors and
with Triton's binary tensor data, over HTTP with system shared memory (inputs and outputs
in registered regions), and over gRPC with dynamic batching; (c) MLServer serving the same
ONNX model through a small custom runtime (``benchmarks/mlserver_onnx_runtime.py``), the
peer, over gRPC and over HTTP (JSON: it takes no binary tensors), each both with its default
inference worker pool and with ``parallel_workers: 0``; ratios are against the better of
the two at each level. Cases: ppocr-det 1x3x640x640 and ppocr-cls 1x3x48x192 at concurrency
1, 8, 32 (closed-loop clients: ``mmaas.bench.load`` for gRPC, ``mmaas.bench.rest`` for HTTP,
the same pre-encoded body for every HTTP server). Servers run one at a time, on loopback
only; every process started is stopped by PID.

Prints the ratios and writes the whole result as JSON under ``benchmarks/results/``, with
the load average of the shared machine before and after.

MLServer lives in its own virtualenv (its pins clash with mmaas's):
``python -m venv /tmp/mlserver-venv && /tmp/mlserver-venv/bin/pip install mlserver==1.7.1
onnxruntime==<mmaas's> "uvloop<0.22"`` (MLServer 1.7.1's worker pool fails to start with
uvloop 0.22+), then ``--mlserver /tmp/mlserver-venv/bin/mlserver``.

Usage: ``python scripts/bench_runtime.py [--duration 10] [--mlserver PATH] [--out FILE]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import onnxruntime

from mmaas.backends import get_runtime
from mmaas.bench import rest
from mmaas.build.local import compile_local
from mmaas.core.files import atomic_write_text
from mmaas.core.manifest import read_manifest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_measure import (
    RawEngine,
    grpc_call,
    measure_rest,
    measure_server,
    paired_c1,
    raw_latency,
    started,
)
from bench_servers import ROOT, mlserver, mmaas_server
from bench_shm import HttpShmClient

CASES = {"ppocr-det": (1, 3, 640, 640), "ppocr-cls": (1, 3, 48, 192)}
PAIR_BLOCKS = 5
MLSERVER_WORKERS = {"default": None, "pw0": 0}  # parallel_workers: pool (default) or none


def measure_mmaas(
    model_dir: Path,
    work: Path,
    model: str,
    raw: RawEngine,
    levels: tuple[int, ...],
    duration: float,
) -> dict[str, dict[str, Any]]:
    """One mmaas server measured over gRPC (paired with raw at c=1), HTTP JSON, HTTP
    binary and HTTP with system shared memory (paired with raw at c=1)."""
    server = mmaas_server(model_dir, work, f"{model}-mmaas")
    try:
        ready = started(server, model)
        grpc_case = {**ready, **measure_server(server, model, raw, levels, duration)}
        grpc_case["paired_c1"] = paired_c1(
            raw, grpc_call(server.url, model, raw), server.url, model, duration
        )
        found = {"mmaas_grpc": grpc_case}
        for kind, encode in (("json", rest.json_body), ("binary", rest.binary_body)):
            body = encode(raw.inputs, raw.datatypes)
            found[f"mmaas_http_{kind}"] = measure_rest(server, model, body, levels, duration)
        client = HttpShmClient(
            server.http_port, model, raw.inputs, raw.datatypes, raw.output_sizes()
        )
        try:
            paired = paired_c1(raw, client.call, server.url, model, duration)
        finally:
            client.close()
        found["mmaas_http_shm"] = {"paired_c1": paired}
        return found
    finally:
        server.stop()


def measure_mlserver(
    binary: Path, source: Path, manifest: Any, work: Path, raw: RawEngine, levels, duration
) -> dict[str, dict[str, Any]]:
    """MLServer with each worker setting, over gRPC and HTTP (JSON)."""
    found = {}
    for tag, workers in MLSERVER_WORKERS.items():
        server = mlserver(binary, source, manifest.model, work, workers)
        model = manifest.model.name
        try:
            ready = started(server, model)
            grpc_case = measure_server(server, model, raw, levels, duration)
            found[f"mlserver_{tag}_grpc"] = {**ready, **grpc_case}
            body = rest.json_body(raw.inputs, raw.datatypes)
            found[f"mlserver_{tag}_http"] = measure_rest(server, model, body, levels, duration)
        finally:
            server.stop()
    return found


def ratios(case: dict[str, Any]) -> dict[str, float]:
    """mmaas over raw ONNX Runtime (p50 at c=1, paired) and over the better MLServer
    setting of the same protocol (throughput and p99 at 8 and 32)."""
    found = {
        "mmaas_grpc_over_raw_p50_c1": case["mmaas_grpc"]["paired_c1"]["mmaas_over_raw_p50"],
        "mmaas_http_shm_over_raw_p50_c1": case["mmaas_http_shm"]["paired_c1"]["mmaas_over_raw_p50"],
    }
    pairs = {
        "grpc": ("mmaas_grpc", "grpc"),
        "grpc_batching": ("mmaas_batching_grpc", "grpc"),
        "http_json": ("mmaas_http_json", "http"),
        "http_binary": ("mmaas_http_binary", "http"),
    }
    for label, (ours, protocol) in pairs.items():
        for level in ("8", "32"):
            peer = best_peer(case, protocol, level)
            mine = case.get(ours, {}).get("levels", {}).get(level)
            if peer and mine:
                found[f"{label}_over_mlserver_{protocol}_throughput_c{level}"] = (
                    mine["throughput_rps"] / peer["throughput_rps"]
                )
                found[f"{label}_over_mlserver_{protocol}_p99_c{level}"] = (
                    mine["p99_ms"] / peer["p99_ms"]
                )
    return {key: round(value, 3) for key, value in found.items()}


def best_peer(case: dict[str, Any], protocol: str, level: str) -> dict[str, Any] | None:
    """The MLServer setting with the higher throughput at ``level`` over ``protocol``
    (its ``setting`` is recorded in the level's copy)."""
    runs = [
        {**case[key]["levels"][level], "setting": tag}
        for tag in MLSERVER_WORKERS
        if level in case.get(key := f"mlserver_{tag}_{protocol}", {}).get("levels", {})
    ]
    return max(runs, key=lambda run: run["throughput_rps"]) if runs else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per level")
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--models", default=",".join(CASES), help="comma list of cases")
    parser.add_argument(
        "--mlserver",
        default=shutil.which("mlserver") or "",
        help="the mlserver executable of MLServer's own venv ('' skips MLServer)",
    )
    parser.add_argument("--out", type=Path, default=None, help="JSON result file")
    args = parser.parse_args()
    levels = tuple(int(part) for part in args.concurrency.split(","))
    result: dict[str, Any] = {
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "load_average_before": os.getloadavg(),
        "machine": {
            "cpu": get_runtime("onnxruntime").describe()["cpu"]["model"],
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "onnxruntime": onnxruntime.__version__,
        },
        "duration_s_per_level": args.duration,
        "cases": {},
    }
    with tempfile.TemporaryDirectory(prefix="mmaas-bench-") as tmp:
        work = Path(tmp)
        for model in args.models.split(","):
            result["cases"][model] = measure_case(model, work, levels, args)
    result["load_average_after"] = os.getloadavg()
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or ROOT / "benchmarks" / "results" / f"runtime-{stamp}.json"
    atomic_write_text(out, json.dumps(result, indent=2) + "\n")
    print(out)


def measure_case(
    model: str, work: Path, levels: tuple[int, ...], args: argparse.Namespace
) -> dict[str, Any]:
    """Every server and protocol on one model (see the module docstring)."""
    shape = CASES[model]
    _, model_dir = compile_local(ROOT / "models" / model)
    manifest = read_manifest(model_dir)
    case: dict[str, Any] = {"shape": list(shape)}
    print(f"== {model} {'x'.join(map(str, shape))}", file=sys.stderr)
    raw = RawEngine.load(model_dir, shape)
    case["raw"] = raw_latency(raw, args.duration)
    case.update(measure_mmaas(model_dir, work, model, raw, levels, args.duration))
    batching = mmaas_server(model_dir, work, f"{model}-batching", MMAAS_DYNAMIC_BATCHING="true")
    try:
        ready = started(batching, model)
        levels_found = measure_server(batching, model, raw, levels, args.duration)
        case["mmaas_batching_grpc"] = {**ready, **levels_found}
    finally:
        batching.stop()
    if args.mlserver:
        source = ROOT / "models" / model / Path(manifest.source.path).name
        case.update(
            measure_mlserver(
                Path(args.mlserver), source, manifest, work, raw, levels, args.duration
            )
        )
    del raw  # free its threads
    case["ratios"] = ratios(case)
    print(json.dumps(case["ratios"], indent=2), file=sys.stderr)
    return case


if __name__ == "__main__":
    main()
