"""Runtime overhead benchmark (issue 4, point 9): in one run, on the same machine and inputs,
measure (a) in-process ONNX Runtime on the served engine, the floor (and, for the
c=1 overhead ratio, alternated block by block with (b) so both see the same load); (b) the mmaas
runtime (``python -m mmaas.server``), with and without dynamic batching; (c) MLServer
serving the same ONNX model through a small custom runtime
(``benchmarks/mlserver_onnx_runtime.py``), the peer. Cases: ppocr-det 1x3x640x640 and
ppocr-cls 1x3x48x192 at concurrency 1, 8, 32 (``mmaas.bench.load`` closed-loop clients).
Servers run one at a time, on loopback only; every process started is stopped by PID.

Prints the ratios (mmaas/raw p50 at concurrency 1; mmaas/MLServer throughput and p99 at
8 and 32) and writes the whole result as JSON under ``benchmarks/results/``.

MLServer lives in its own virtualenv (its pins clash with mmaas's):
``python -m venv /tmp/mlserver-venv && /tmp/mlserver-venv/bin/pip install mlserver==1.7.1
onnxruntime==<mmaas's>``, then ``--mlserver /tmp/mlserver-venv/bin/mlserver``.

Usage: ``python scripts/bench_runtime.py [--duration 10] [--mlserver PATH] [--out FILE]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime
import tritonclient.grpc as triton

from mmaas.backends import get_runtime
from mmaas.bench.load import BenchRequest, run
from mmaas.build.local import compile_local
from mmaas.core.files import atomic_write_text
from mmaas.core.manifest import ModelInfo, TensorInfo, read_manifest
from mmaas.core.samples import sample_inputs

ROOT = Path(__file__).resolve().parent.parent
CASES = {"ppocr-det": (1, 3, 640, 640), "ppocr-cls": (1, 3, 48, 192)}
RUNTIME_FILE = ROOT / "benchmarks" / "mlserver_onnx_runtime.py"
START_TIMEOUT_S = 120
PAIR_BLOCKS = 5


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class RawEngine:
    """The floor: the served engine, loaded in-process by the same back end with the same
    thread count, and its inputs at the case's shape."""

    engine: Any
    inputs: dict[str, np.ndarray]
    outputs: list[str]

    @classmethod
    def load(cls, model_dir: Path, shape: tuple[int, ...]) -> RawEngine:
        manifest = read_manifest(model_dir)
        info = manifest.model
        engine = get_runtime(info.backend).load(model_dir, manifest, os.cpu_count() or 1)
        at_shape = replace(info, inputs=tuple(replace(t, opt=shape) for t in info.inputs))
        raw = cls(engine, sample_inputs(at_shape, "opt"), [t.name for t in info.outputs])
        for _ in range(3):
            raw.call()
        return raw

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


def paired_c1(raw: RawEngine, url: str, model: str, duration: float) -> dict[str, Any]:
    """Raw ``infer`` and mmaas requests (concurrency 1) in alternating blocks of
    back-to-back calls, :data:`PAIR_BLOCKS` of each over ``duration`` seconds, so that both
    see the same drift of machine load (this machine is shared): the c=1 overhead ratio."""
    client = triton.InferenceServerClient(url)
    inputs = []
    for name, array in raw.inputs.items():
        tensor = triton.InferInput(name, list(array.shape), "FP32")
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)

    def served() -> float:
        started = time.perf_counter()
        client.infer(model, inputs)
        return (time.perf_counter() - started) * 1000

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


class Server:
    """A server subprocess, stopped by PID (SIGTERM, then SIGKILL after 30 s)."""

    def __init__(self, argv: list[str], env: dict[str, str], port: int, log: Path) -> None:
        self.port, self.log = port, log
        with log.open("wb") as stream:
            self.process = subprocess.Popen(
                argv, env={**os.environ, **env}, stdout=stream, stderr=subprocess.STDOUT
            )
        self.started = time.monotonic()

    def wait_ready(self, model: str) -> float:
        """Seconds from spawn until ModelReady is true."""
        client = triton.InferenceServerClient(f"127.0.0.1:{self.port}")
        while time.monotonic() - self.started < START_TIMEOUT_S:
            if self.process.poll() is not None:
                sys.exit(f"server exited {self.process.returncode}:\n{self.log.read_text()}")
            try:
                if client.is_model_ready(model):
                    return time.monotonic() - self.started
            except Exception:  # not listening yet
                pass
            time.sleep(0.02)
        self.stop()
        sys.exit(f"server not ready in {START_TIMEOUT_S} s:\n{self.log.read_text()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def measure_server(
    server: Server,
    model: str,
    shape: tuple[int, ...],
    levels: tuple[int, ...],
    duration: float,
    raw: RawEngine | None = None,
) -> dict[str, Any]:
    """Wait for the server, optionally pair it with ``raw`` at c=1, then sweep ``levels``."""
    paired = None
    try:
        ready_s = server.wait_ready(model)
        if raw is not None:
            paired = paired_c1(raw, f"127.0.0.1:{server.port}", model, duration)
        results = run(
            BenchRequest(
                url=f"127.0.0.1:{server.port}",
                model=model,
                shapes={"x": shape},
                concurrency=levels,
                duration_s=duration,
                warmup_requests=10,
            )
        )
    finally:
        server.stop()
    log = server.log.read_text(errors="replace")
    after_start = re.search(r"\(([\d.]+) s after process start\)", log)
    return {
        "ready_s": round(ready_s, 3),
        "ready_after_process_start_s": float(after_start.group(1)) if after_start else None,
        "levels": {str(r.concurrency): asdict(r) for r in results},
        **({"paired_c1": paired} if paired else {}),
    }


def mmaas_server(model_dir: Path, work: Path, name: str, **env: str) -> Server:
    port = free_port()
    return Server(
        [sys.executable, "-m", "mmaas.server"],
        {
            "MMAAS_MODEL_DIR": str(model_dir),
            "MMAAS_HOST": "127.0.0.1",
            "MMAAS_GRPC_PORT": str(port),
            "MMAAS_METRICS_PORT": str(free_port()),
            "MMAAS_HTTP_PORT": str(free_port()),
            **env,
        },
        port,
        work / f"{name}.log",
    )


def mlserver(binary: Path, source: Path, info: ModelInfo, work: Path) -> Server:
    """MLServer on ``source`` with the signature of ``info`` as its declared metadata."""
    model = info.name
    root = work / f"mlserver-{model}"
    (root / model).mkdir(parents=True)
    port = free_port()
    settings = {
        "debug": False,
        "host": "127.0.0.1",
        "http_port": free_port(),
        "grpc_port": port,
        "metrics_port": free_port(),
        "grpc_max_message_length": 64 * 1024 * 1024,
    }
    (root / "settings.json").write_text(json.dumps(settings))
    shutil.copy(RUNTIME_FILE, root / model / RUNTIME_FILE.name)
    (root / model / "model-settings.json").write_text(
        json.dumps(
            {
                "name": model,
                "implementation": "mlserver_onnx_runtime.OnnxRuntimeModel",
                "parameters": {"uri": str(source), "version": info.version},
                "inputs": [_metadata(t) for t in info.inputs],
                "outputs": [_metadata(t) for t in info.outputs],
            }
        )
    )
    return Server([str(binary), "start", str(root)], {}, port, work / f"mlserver-{model}.log")


def _metadata(tensor: TensorInfo) -> dict[str, Any]:
    return {"name": tensor.name, "datatype": tensor.datatype, "shape": list(tensor.shape)}


def ratios(case: dict[str, Any]) -> dict[str, float]:
    mmaas, peer = case["mmaas"]["levels"], case.get("mlserver", {}).get("levels", {})
    found = {
        "mmaas_over_raw_p50_c1": case["mmaas"]["paired_c1"]["mmaas_over_raw_p50"],
        "mmaas_over_raw_p50_c1_unpaired": mmaas["1"]["p50_ms"] / case["raw"]["p50_ms"],
    }
    for level in ("8", "32"):
        if level in peer and level in mmaas:
            found[f"mmaas_over_mlserver_throughput_c{level}"] = (
                mmaas[level]["throughput_rps"] / peer[level]["throughput_rps"]
            )
            found[f"mmaas_over_mlserver_p99_c{level}"] = (
                mmaas[level]["p99_ms"] / peer[level]["p99_ms"]
            )
    batched = case.get("mmaas_batching", {}).get("levels", {})
    for level in ("8", "32"):
        if level in peer and level in batched:
            found[f"mmaas_batching_over_mlserver_throughput_c{level}"] = (
                batched[level]["throughput_rps"] / peer[level]["throughput_rps"]
            )
    return {key: round(value, 3) for key, value in found.items()}


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
            shape = CASES[model]
            _, model_dir = compile_local(ROOT / "models" / model)
            manifest = read_manifest(model_dir)
            case: dict[str, Any] = {"shape": list(shape)}
            print(f"== {model} {'x'.join(map(str, shape))}", file=sys.stderr)
            raw = RawEngine.load(model_dir, shape)
            case["raw"] = raw_latency(raw, args.duration)
            case["mmaas"] = measure_server(
                mmaas_server(model_dir, work, f"{model}-mmaas"),
                model,
                shape,
                levels,
                args.duration,
                raw,
            )
            del raw  # free its threads before the other servers run
            case["mmaas_batching"] = measure_server(
                mmaas_server(model_dir, work, f"{model}-batching", MMAAS_DYNAMIC_BATCHING="true"),
                model,
                shape,
                levels,
                args.duration,
            )
            if args.mlserver:
                source = ROOT / "models" / model / Path(manifest.source.path).name
                case["mlserver"] = measure_server(
                    mlserver(Path(args.mlserver), source, manifest.model, work),
                    model,
                    shape,
                    levels,
                    args.duration,
                )
            case["ratios"] = ratios(case)
            print(json.dumps(case["ratios"], indent=2), file=sys.stderr)
            result["cases"][model] = case
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or ROOT / "benchmarks" / "results" / f"runtime-{stamp}.json"
    atomic_write_text(out, json.dumps(result, indent=2) + "\n")
    print(out)


if __name__ == "__main__":
    main()
