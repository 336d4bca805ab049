"""perf_analyzer (Triton's own load tool, 2.51) against the mmaas gRPC server: plain
ModelInfer, system shared memory, ModelStreamInfer, and both, on ppocr-det 1x3x640x640 and
ppocr-cls 1x3x48x192 at concurrency 1 and 8, with the server-side statistics perf_analyzer
reads back (Triton's version policy makes them non-zero). The floor is in-process ONNX
Runtime on the served engine (``scripts/bench_runtime.py``'s RawEngine), measured in blocks
around each concurrency-1 run so both see the same machine load; the ratio that matters
is mmaas-with-shared-memory p50 / raw p50 at concurrency 1.

perf_analyzer runs in "time_windows" mode (``-p`` ms windows, stability check off:
``--stability-percentage 999``, the machine is shared). Servers run one at a time on
loopback; every process started is stopped by PID. Prints a table and writes JSON (with
the load average) under ``benchmarks/results/``.

Usage: ``python scripts/bench_perf_analyzer.py [--window-ms 3000] [--models ppocr-det,ppocr-cls]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench_measure import RawEngine, raw_latency  # this folder
from bench_runtime import CASES
from bench_servers import ROOT, mmaas_server
from mmaas.build.local import compile_local
from mmaas.core.files import atomic_write_text
from perf_analyzer_output import figures

PERF_ANALYZER = Path(sys.executable).parent / "perf_analyzer"
MODES = {
    "grpc": (),
    "grpc+shm": ("--shared-memory", "system"),
    "grpc+stream": ("--streaming",),
    "grpc+stream+shm": ("--streaming", "--shared-memory", "system"),
}


def perf_analyzer(
    url: str,
    model: str,
    shape: tuple[int, ...],
    batched: bool,
    level: int,
    window: int,
    flags: tuple[str, ...],
) -> dict[str, Any]:
    """One perf_analyzer run; the figures it printed (client and server side). A batched
    model (``max_batch_size > 0``) gets ``shape`` without its batch axis in ``--shape``
    and the batch as ``-b`` (perf_analyzer prepends the batch axis itself)."""
    dims = shape[1:] if batched else shape
    argv = [
        str(PERF_ANALYZER),
        "-m",
        model,
        "-i",
        "grpc",
        "-u",
        url,
        *(["-b", str(shape[0])] if batched else []),
        "--shape",
        f"x:{','.join(map(str, dims))}",
        "--concurrency-range",
        str(level),
        "-p",
        str(window),
        "--max-trials",
        "3",
        "--stability-percentage",
        "999",
        *flags,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"perf_analyzer failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return figures(done.stdout)


def bench_model(model: str, window: int, levels: tuple[int, ...], work: Path) -> dict[str, Any]:
    shape = CASES[model]
    loaded, model_dir = compile_local(ROOT / "models" / model)
    batched = loaded.spec.max_batch_size > 0
    raw = RawEngine.load(model_dir, shape)
    # perf_analyzer sizes output regions at 100 KiB unless told: the largest output here
    output_bytes = ("--output-shared-memory-size", str(max(raw.output_sizes().values())))
    raw_blocks = [raw_latency(raw, window / 1000)]
    server = mmaas_server(model_dir, work, f"{model}-pa", MMAAS_SHUTDOWN_GRACE_S="0")
    runs: dict[str, dict[str, Any]] = {}
    try:
        server.wait_ready(model)
        url = f"127.0.0.1:{server.port}"
        for mode, flags in MODES.items():
            for level in levels:
                print(f"  {model} {mode} c={level}", file=sys.stderr)
                runs[f"{mode} c={level}"] = perf_analyzer(
                    url,
                    model,
                    shape,
                    batched,
                    level,
                    window,
                    (*flags, *output_bytes) if "shm" in mode else flags,
                )
                if level == 1:
                    raw_blocks.append(raw_latency(raw, window / 1000))
    finally:
        server.stop()
    raw_p50_ms = sum(block["p50_ms"] for block in raw_blocks) / len(raw_blocks)
    shm_p50 = runs.get("grpc+shm c=1", {}).get("p50_us")
    return {
        "shape": list(shape),
        "raw_p50_ms": raw_p50_ms,
        "raw_blocks": raw_blocks,
        "perf_analyzer": runs,
        "shm_c1_p50_over_raw": shm_p50 / 1000 / raw_p50_ms if shm_p50 else None,
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        f"{'case':<34}{'infer/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'server n':>10}{'srv req ms':>11}"
    ]
    for model, case in result["cases"].items():
        lines.append(f"{model} raw ONNX Runtime c=1 p50 {case['raw_p50_ms']:.2f} ms")
        for name, run in case["perf_analyzer"].items():
            lines.append(
                f"  {name:<32}{run['throughput']:>9.1f}{run['p50_us'] / 1000:>9.2f}"
                f"{run['p99_us'] / 1000:>9.2f}{run['server_inference_count'] or 0:>10.0f}"
                f"{(run['server_request_us'] or 0) / 1000:>11.2f}"
            )
        if case["shm_c1_p50_over_raw"]:
            lines.append(f"  shm c=1 p50 / raw p50 = {case['shm_c1_p50_over_raw']:.3f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window-ms", type=int, default=3000)
    parser.add_argument("--concurrency", default="1,8")
    parser.add_argument("--models", default=",".join(CASES))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    levels = tuple(int(part) for part in args.concurrency.split(","))
    result: dict[str, Any] = {
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "perf_analyzer": subprocess.run(
            [str(PERF_ANALYZER), "--version"], capture_output=True, text=True
        ).stdout.strip(),
        "cores": os.cpu_count(),
        "load_average_before": os.getloadavg(),
        "window_ms": args.window_ms,
        "cases": {},
    }
    with tempfile.TemporaryDirectory(prefix="mmaas-pa-") as tmp:
        for model in args.models.split(","):
            result["cases"][model] = bench_model(model, args.window_ms, levels, Path(tmp))
    result["load_average_after"] = os.getloadavg()
    print(table(result))
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or ROOT / "benchmarks" / "results" / f"perf-analyzer-{stamp}.json"
    atomic_write_text(out, json.dumps(result, indent=2) + "\n")
    print(out)


if __name__ == "__main__":
    main()
