"""The serving overhead at concurrency 1: what one request costs in ``python -m mmaas.server``
beyond its engine, over gRPC (raw bytes in the messages, and system shared memory for the
input and the output, as tritonclient.utils.shared_memory registers it) and HTTP (binary
tensor data), against the engine alone (the served engine's ``infer`` on the same inputs,
loaded the way the server loads it).

A small FP32 model (``y = relu(x) * 2``, x ``[-1, 3, H, W]``, batch axis, built with
onnx.helper and compiled by the real builder stage) keeps the engine's own time small, so
what remains is the request path: the front end, decoding, the data plane, the scheduler's
hand-over to an engine thread, encoding, the reply, and the client's own share (the same
tritonclient for every tree). ``--before TOOLKIT`` serves the same model directory from a
second checkout's toolkit (e.g. ``/work/main/toolkit``) at the same time; rounds alternate
the trees and the transports request block by request block, so the machine's noise hits
each alike (each tree goes first every other round). Figures are medians over rounds of
each round's p50, with their range. ``--batching`` serves with dynamic batching on at its
default ``max_queue_delay_us`` (100): a lone request waits that long for company.

Usage: ``python benchmarks/serving_overhead.py [--before /work/main/toolkit] [--rounds 15]
[--requests 300] [--size 64] [--batching]``; prints a table and writes
``benchmarks/results/serving-overhead-<UTC>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from onnx import TensorProto, helper

from mmaas.backends import CompileRequest, get_runtime
from mmaas.backends.onnxruntime.runtime.settings import OnnxRuntimeSettings
from mmaas.core.manifest import ModelInfo, TensorInfo, read_manifest
from mmaas.stage.build import build_model_dir

ROOT = Path(__file__).resolve().parent.parent
MODES = ("grpc", "grpc+shm", "http")


def model_dir(work: Path, size: int) -> Path:
    """Build and compile the benchmark model (``relu(x) * 2`` on ``[-1, 3, size, size]``)."""
    dims = [None, 3, size, size]
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mul", ["r", "two"], ["y"])],
        "overhead",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)],
        [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    source = work / "overhead.onnx"
    onnx.save(model, source)
    shape = (1, 3, size, size)
    info = ModelInfo(
        name="overhead",
        version="1",
        backend="onnxruntime",
        precision="fp32",
        max_batch_size=4,
        inputs=(TensorInfo("x", "FP32", (-1, 3, size, size), shape, shape, (4, 3, size, size)),),
        outputs=(TensorInfo("y", "FP32", (-1, 3, size, size)),),
    )
    out = work / "model"
    settings = OnnxRuntimeSettings(graph_optimization_level="all")
    build_model_dir(CompileRequest(info, source, out, settings), "sha256:" + "0" * 64, out)
    return out


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on 127.0.0.1 now (all bound until all are chosen)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def percentile(samples: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``samples`` (nearest rank)."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def raw_engine(folder: Path, x: np.ndarray, requests: int) -> list[float]:
    """The engine alone: its ``infer`` per request (ms), loaded as the server loads it."""
    manifest = read_manifest(folder)
    engine = get_runtime("onnxruntime").load(folder, manifest, 0)
    times = []
    for _ in range(requests + 20):
        start = time.perf_counter_ns()
        engine.infer({"x": x}, ["y"])
        times.append((time.perf_counter_ns() - start) / 1e6)
    return times[20:]


class Served:
    """One ``python -m mmaas.server`` of ``folder`` from ``toolkit``, with its clients."""

    def __init__(
        self, name: str, toolkit: Path, folder: Path, x: np.ndarray, log: Path, batching: bool
    ) -> None:
        self.name = name
        self.grpc_port, metrics, self.http_port = free_ports(3)
        env = {**os.environ, "PYTHONPATH": str(toolkit), "MMAAS_MODEL_DIR": str(folder),
               "MMAAS_HOST": "127.0.0.1", "MMAAS_GRPC_PORT": str(self.grpc_port),
               "MMAAS_METRICS_PORT": str(metrics), "MMAAS_HTTP_PORT": str(self.http_port),
               "MMAAS_INSTANCE_COUNT": "1", "MMAAS_SHUTDOWN_GRACE_S": "0",
               "MMAAS_DYNAMIC_BATCHING": str(batching).lower()}  # fmt: skip
        with log.open("wb") as sink:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "mmaas.server"], env=env, stdout=sink, stderr=sink
            )
        self.x = x
        self.grpc = grpcclient.InferenceServerClient(f"127.0.0.1:{self.grpc_port}")
        self.http = httpclient.InferenceServerClient(f"127.0.0.1:{self.http_port}")
        deadline = time.monotonic() + 120
        while not self._ready():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name}: server did not start: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        self._shared_memory()

    def _ready(self) -> bool:
        try:
            return bool(self.grpc.is_server_ready())
        except Exception:
            return False

    def _shared_memory(self) -> None:
        size = self.x.nbytes
        self.keys = [f"/overhead-{self.name}-{os.getpid()}-{n}" for n in ("in", "out")]
        self.handles = [shm.create_shared_memory_region(k, k, size) for k in self.keys]
        shm.set_shared_memory_region(self.handles[0], [self.x])
        for key in self.keys:
            self.grpc.register_system_shared_memory(key.strip("/"), key, size)
        self.shm_inputs = [grpcclient.InferInput("x", list(self.x.shape), "FP32")]
        self.shm_inputs[0].set_shared_memory(self.keys[0].strip("/"), size)
        self.shm_outputs = [grpcclient.InferRequestedOutput("y")]
        self.shm_outputs[0].set_shared_memory(self.keys[1].strip("/"), size)

    def one(self, mode: str) -> np.ndarray:
        """One request over ``mode``; the output."""
        if mode == "grpc":
            tensor = grpcclient.InferInput("x", list(self.x.shape), "FP32")
            tensor.set_data_from_numpy(self.x)
            return self.grpc.infer("overhead", [tensor]).as_numpy("y")
        if mode == "grpc+shm":
            self.grpc.infer("overhead", self.shm_inputs, outputs=self.shm_outputs)
            return shm.get_contents_as_numpy(self.handles[1], np.float32, list(self.x.shape))
        tensor = httpclient.InferInput("x", list(self.x.shape), "FP32")
        tensor.set_data_from_numpy(self.x, binary_data=True)
        wanted = [httpclient.InferRequestedOutput("y", binary_data=True)]
        return self.http.infer("overhead", [tensor], outputs=wanted).as_numpy("y")

    def block(self, mode: str, requests: int) -> list[float]:
        """``requests`` requests one after another (ms each), after 10 unmeasured."""
        times = []
        for index in range(requests + 10):
            start = time.perf_counter_ns()
            self.one(mode)
            if index >= 10:
                times.append((time.perf_counter_ns() - start) / 1e6)
        return times

    def stop(self) -> None:
        for key in self.keys:
            self.grpc.unregister_system_shared_memory(key.strip("/"))
        for handle in self.handles:
            shm.destroy_shared_memory_region(handle)
        self.process.terminate()
        self.process.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="a second checkout's toolkit directory")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--size", type=int, default=64, help="H = W of the input")
    parser.add_argument(
        "--batching", action="store_true", help="dynamic batching on (max_queue_delay 100 us)"
    )
    args = parser.parse_args()
    x = np.random.default_rng(0).standard_normal((1, 3, args.size, args.size), np.float32)
    expected = np.maximum(x, 0) * 2
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        folder = model_dir(work, args.size)
        trees = {"after": ROOT / "toolkit"}
        if args.before:
            trees = {"before": args.before.resolve(), **trees}
        servers = [
            Served(n, t, folder, x, work / f"{n}.log", args.batching) for n, t in trees.items()
        ]
        try:
            for server in servers:
                for mode in MODES:
                    np.testing.assert_allclose(server.one(mode), expected, rtol=1e-6)
            p50: dict[str, list[float]] = {"raw": []}
            for turn in range(args.rounds):
                p50["raw"].append(percentile(raw_engine(folder, x, args.requests), 0.5))
                for server in servers[:: -1 if turn % 2 else 1]:  # each tree first in turn
                    for mode in MODES:
                        times = server.block(mode, args.requests)
                        p50.setdefault(f"{server.name} {mode}", []).append(percentile(times, 0.5))
        finally:
            for server in servers:
                server.stop()
    report(args, p50, trees, load_before)


def report(
    args: argparse.Namespace, p50: dict[str, list[float]], trees: dict[str, Path], load: Any
) -> None:
    """Print the table and write the JSON."""
    raw = statistics.median(p50["raw"])
    rows = {}
    print(f"{'path':<20} {'p50 ms':>8} {'range':>17} {'overhead ms':>12}")
    for name, values in p50.items():
        median = statistics.median(values)
        rows[name] = {"p50_ms": round(median, 4), "p50_range_ms": [round(min(values), 4),
                      round(max(values), 4)], "overhead_ms": round(median - raw, 4)}  # fmt: skip
        spread = f"{min(values):.3f}-{max(values):.3f}"
        print(f"{name:<20} {median:>8.3f} {spread:>17} {median - raw:>12.3f}")
    if "before grpc" in rows:
        for mode in MODES:
            cut = rows[f"before {mode}"]["overhead_ms"] - rows[f"after {mode}"]["overhead_ms"]
            print(f"{mode}: overhead cut by {cut:.3f} ms")
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = ROOT / "benchmarks" / "results" / f"serving-overhead-{stamp}.json"
    out.write_text(json.dumps({
        "benchmark": "serving_overhead", "model": f"relu(x)*2 FP32 [1,3,{args.size},{args.size}]",
        "concurrency": 1, "dynamic_batching": args.batching, "rounds": args.rounds,
        "requests_per_block": args.requests,
        "trees": {k: str(v) for k, v in trees.items()}, "cpus": os.cpu_count(),
        "load_average_before": load, "load_average_after": os.getloadavg(), "results": rows,
    }, indent=1) + "\n")  # fmt: skip
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
