"""The HTTP stack comparison behind docs/http.md, reproducible: the real mmaas server
(``python -m mmaas.server`` on ppocr-cls) with its HTTP front end served by Granian's
embedded server (what mmaas ships) and by uvicorn + httptools (the one-line fallback of
``mmaas.server.http.server``), the same Starlette app and request path in both. Loads:
perf_analyzer 2.51 ``-i http`` (binary tensors, C++ client) at concurrency 1, 8, 32 and a
pre-encoded JSON body (``mmaas.bench.rest``) at 8 and 32. Stacks alternate in a shuffled
order each round, so both see the same drift of the shared machine's load.

Needs uvicorn in the venv (``pip install uvicorn==0.54.0 httptools==0.9.0``; not a
dependency of mmaas) and perf_analyzer (scripts/install_clients.sh).
Usage: ``python benchmarks/http_stacks.py [--rounds 3] [--duration 5] [--out FILE]``;
prints a table, writes ``benchmarks/results/http-stacks-<time>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import random
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from bench_servers import ROOT, mmaas_server
from mmaas.bench import rest
from mmaas.build.local import compile_local
from mmaas.core.files import atomic_write_text

STACKS = ("granian", "uvicorn")
MODEL = "ppocr-cls"
PERF_ANALYZER = Path(sys.executable).parent / "perf_analyzer"


class UvicornServer:
    """``HttpServer``'s interface (start, stop) on uvicorn + httptools (the fallback)."""

    def __init__(self, app: Any, settings: Any) -> None:
        import uvicorn

        config = uvicorn.Config(
            app,
            host=settings.host,
            port=settings.http_port,
            http="httptools",
            lifespan="off",
            access_log=False,
            log_level="warning",
        )
        self.server = uvicorn.Server(config)
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.server.serve())
        while not self.server.started:
            await asyncio.sleep(0.01)

    async def stop(self, grace_s: float) -> None:
        self.server.should_exit = True
        if self.task is not None:
            await self.task


def serve(stack: str) -> None:
    """The child process: mmaas's server, with uvicorn swapped in when asked."""
    if stack == "uvicorn":
        import mmaas.server.app

        mmaas.server.app.HttpServer = UvicornServer  # type: ignore[misc]
    from mmaas.server.__main__ import main

    sys.exit(main())


def perf_analyzer(http_url: str, level: int, duration_s: float, work: Path) -> dict[str, float]:
    report = work / f"pa-{level}.csv"
    argv = [
        str(PERF_ANALYZER),
        "-m",
        MODEL,
        "-i",
        "http",
        "-u",
        http_url,
        "--shape",
        "x:3,48,192",
        "--concurrency-range",
        f"{level}:{level}",
        "-p",
        str(int(duration_s * 1000)),
        "--max-trials",
        "3",
        "--stability-percentage",
        "999",
        "-f",
        str(report),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        sys.exit(f"perf_analyzer failed:\n{done.stdout}\n{done.stderr}")
    row = next(csv.DictReader(report.open()))
    return {
        "throughput_rps": float(row["Inferences/Second"]),
        "p50_ms": float(row["p50 latency"]) / 1000,
        "p99_ms": float(row["p99 latency"]) / 1000,
    }


def measure(stack: str, model_dir: Path, work: Path, duration_s: float) -> dict[str, Any]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--serve", stack]
    server = mmaas_server(model_dir, work, f"stack-{stack}", argv)
    try:
        ready_s = server.wait_ready(MODEL)
        http_url = f"127.0.0.1:{server.http_port}"
        found: dict[str, Any] = {"ready_s": round(ready_s, 3)}
        for level in (1, 8, 32):
            found[f"binary_c{level}"] = perf_analyzer(http_url, level, duration_s, work)
        data = np.random.default_rng(0).random((1, 3, 48, 192), dtype=np.float32)
        body = rest.json_body({"x": data}, {"x": "FP32"})
        for result in rest.measure(server.infer_url(MODEL), lambda _: body, (8, 32), duration_s):
            found[f"json_c{result.concurrency}"] = {
                "throughput_rps": result.throughput_rps,
                "p50_ms": result.p50_ms,
                "p99_ms": result.p99_ms,
            }
        return found
    finally:
        server.stop()


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve(sys.argv[2])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per window")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    _, model_dir = compile_local(ROOT / "models" / MODEL)
    result: dict[str, Any] = {
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "load_average_before": os.getloadavg(),
        "rounds": [],
    }
    with tempfile.TemporaryDirectory(prefix="mmaas-stacks-") as tmp:
        for _ in range(args.rounds):
            order = random.sample(STACKS, len(STACKS))
            result["rounds"].append(
                {s: measure(s, model_dir, Path(tmp), args.duration) for s in order}
            )
    result["load_average_after"] = os.getloadavg()
    result["median"] = {
        stack: {
            key: {
                metric: median(r[stack][key][metric] for r in result["rounds"])
                for metric in ("throughput_rps", "p50_ms", "p99_ms")
            }
            for key in result["rounds"][0][stack]
            if key != "ready_s"
        }
        for stack in STACKS
    }
    for key in result["median"]["granian"]:
        cells = "  ".join(
            f"{s} {result['median'][s][key]['throughput_rps']:7.1f} req/s p50 "
            f"{result['median'][s][key]['p50_ms']:6.1f} ms"
            for s in STACKS
        )
        print(f"{key:10} {cells}")
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or ROOT / "benchmarks" / "results" / f"http-stacks-{stamp}.json"
    atomic_write_text(out, json.dumps(result, indent=2) + "\n")
    print(out)


if __name__ == "__main__":
    main()
