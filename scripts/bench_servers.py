"""The servers scripts/bench_runtime.py measures, each a subprocess on loopback stopped by
PID: mmaas (``python -m mmaas.server``: gRPC and HTTP/REST ports) and MLServer serving
the same ONNX file through ``benchmarks/mlserver_onnx_runtime.py``, with its default
inference worker pool or with ``parallel_workers: 0`` (inference in the main process)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import tritonclient.grpc as triton

from mmaas.core.manifest import ModelInfo, TensorInfo

ROOT = Path(__file__).resolve().parent.parent
RUNTIME_FILE = ROOT / "benchmarks" / "mlserver_onnx_runtime.py"
START_TIMEOUT_S = 120


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """A server subprocess (gRPC ``port``, HTTP ``http_port``), stopped by PID (SIGTERM,
    then SIGKILL after 30 s)."""

    def __init__(
        self, argv: list[str], env: dict[str, str], port: int, http_port: int, log: Path
    ) -> None:
        self.port, self.http_port, self.log = port, http_port, log
        with log.open("wb") as stream:
            self.process = subprocess.Popen(  # in the work folder: MLServer writes .metrics/
                argv,
                env={**os.environ, **env},
                stdout=stream,
                stderr=subprocess.STDOUT,
                cwd=log.parent,
            )
        self.started = time.monotonic()

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.port}"

    def infer_url(self, model: str) -> str:
        return f"http://127.0.0.1:{self.http_port}/v2/models/{model}/infer"

    def wait_ready(self, model: str) -> float:
        """Seconds from spawn until ModelReady is true."""
        client = triton.InferenceServerClient(self.url)
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


def mmaas_server(
    model_dir: Path, work: Path, name: str, argv: list[str] | None = None, **env: str
) -> Server:
    """``python -m mmaas.server`` (or ``argv``) on ``model_dir`` with ``env`` added."""
    port, http_port = free_port(), free_port()
    settings = {
        "MMAAS_MODEL_DIR": str(model_dir),
        "MMAAS_HOST": "127.0.0.1",
        "MMAAS_GRPC_PORT": str(port),
        "MMAAS_HTTP_PORT": str(http_port),
        "MMAAS_METRICS_PORT": str(free_port()),
        "MMAAS_SHUTDOWN_GRACE_S": "0",
        **env,
    }
    command = argv or [sys.executable, "-m", "mmaas.server"]
    return Server(command, settings, port, http_port, work / f"{name}.log")


def mlserver(
    binary: Path, source: Path, info: ModelInfo, work: Path, workers: int | None
) -> Server:
    """MLServer on ``source`` with the signature of ``info`` as its declared metadata;
    ``workers`` None = its default inference pool, else ``parallel_workers``."""
    model = info.name
    tag = "default" if workers is None else f"pw{workers}"
    root = work / f"mlserver-{model}-{tag}"
    (root / model).mkdir(parents=True)
    port, http_port = free_port(), free_port()
    settings: dict[str, Any] = {
        "debug": False,
        "host": "127.0.0.1",
        "http_port": http_port,
        "grpc_port": port,
        "metrics_port": free_port(),
        "grpc_max_message_length": 64 * 1024 * 1024,
    }
    if workers is not None:
        settings["parallel_workers"] = workers
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
    argv = [str(binary), "start", str(root)]
    return Server(argv, {}, port, http_port, work / f"mlserver-{model}-{tag}.log")


def _metadata(tensor: TensorInfo) -> dict[str, Any]:
    return {"name": tensor.name, "datatype": tensor.datatype, "shape": list(tensor.shape)}
