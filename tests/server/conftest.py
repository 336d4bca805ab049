"""Server test fixtures: model directories compiled by the real builder stage
(``mmaas.stage.build.build_model_dir``) and the real server (``python -m mmaas.server``) in a
subprocess on a free loopback port, waited for until health reports SERVING and
stopped by its PID with SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import onnx
import pytest
import tritonclient.grpc as triton
from grpc_health.v1 import health_pb2, health_pb2_grpc

from mmaas.backends import CompileRequest
from mmaas.core.manifest import ModelInfo
from mmaas.stage.build import build_model_dir
from onnx_builder import ORT_SETTINGS
from real_models import silero_info, silero_vad

from . import graphs

START_TIMEOUT_S = 60.0


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on 127.0.0.1 right now: every socket stays bound
    until all are chosen, so no two calls hand out the same port."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def compile_model_dir(source: Path, info: ModelInfo, out_dir: Path) -> Path:
    """Run the builder stage on ``source`` for ``info``; returns the model directory."""
    request = CompileRequest(model=info, source=source, out_dir=out_dir, settings=ORT_SETTINGS)
    build_model_dir(request, "sha256:" + "0" * 64, out_dir)
    return out_dir


@dataclass(frozen=True)
class ClientTls:
    """PEM files a TLS client uses: the CA that signed the server, and for mTLS its own
    certificate chain and key."""

    root_cert: Path
    cert: Path | None = None
    key: Path | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            self.root_cert.read_bytes(),
            self.key.read_bytes() if self.key else None,
            self.cert.read_bytes() if self.cert else None,
        )


@dataclass
class RunningServer:
    """A server subprocess: its gRPC, metrics and HTTP ports, its stderr log file, and the
    TLS files its clients need (None = plain text)."""

    process: subprocess.Popen[bytes]
    port: int
    metrics_port: int
    log: Path
    tls: ClientTls | None = None
    http_port: int = 0

    @property
    def http_url(self) -> str:
        """``127.0.0.1:PORT`` of the KServe v2 HTTP/REST front end."""
        return f"127.0.0.1:{self.http_port}"

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.port}"

    def client(self) -> triton.InferenceServerClient:
        if self.tls is None:
            return triton.InferenceServerClient(self.url)
        return triton.InferenceServerClient(
            self.url,
            ssl=True,
            root_certificates=str(self.tls.root_cert),
            private_key=str(self.tls.key) if self.tls.key else None,
            certificate_chain=str(self.tls.cert) if self.tls.cert else None,
        )

    def channel(self) -> grpc.Channel:
        if self.tls is None:
            return grpc.insecure_channel(self.url)
        return grpc.secure_channel(self.url, self.tls.credentials())

    def metrics(self) -> str:
        """The Prometheus text exposition from ``/metrics``."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as reply:
            return reply.read().decode()

    def metric(self, name: str, **labels: str) -> float:
        """One sample's value: ``name`` with at least ``labels``; 0.0 when absent."""
        for line in self.metrics().splitlines():
            sample, _, value = line.rpartition(" ")
            if sample.split("{")[0] == name and all(
                f'{key}="{val}"' in sample for key, val in labels.items()
            ):
                return float(value)
        return 0.0

    def health(self, timeout: float = 2.0) -> str:
        """``SERVING`` / ``NOT_SERVING`` of the whole server, or ``UNREACHABLE``."""
        with self.channel() as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            try:
                reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout)
            except grpc.RpcError:
                return "UNREACHABLE"
        return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_serving(self, timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"server exited {self.process.returncode}:\n{self.stderr()}")
            if self.health(timeout=0.5) == "SERVING":
                return
            time.sleep(0.05)
        raise AssertionError(f"server not SERVING after {timeout} s:\n{self.stderr()}")

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM by PID, wait; SIGKILL if it does not exit in ``timeout``. Exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def launch(
    model_dir: Path, log: Path, env: dict[str, str] | None = None, tls: ClientTls | None = None
) -> RunningServer:
    """Start ``python -m mmaas.server`` on ``model_dir`` (not waiting for SERVING); ``tls``
    is what clients need when ``env`` turns TLS on."""
    port, metrics_port, http_port = free_ports(3)
    full_env = {
        **os.environ,
        "MMAAS_MODEL_DIR": str(model_dir),
        "MMAAS_HOST": "127.0.0.1",
        "MMAAS_GRPC_PORT": str(port),
        "MMAAS_METRICS_PORT": str(metrics_port),
        "MMAAS_HTTP_PORT": str(http_port),
        "MMAAS_SHUTDOWN_GRACE_S": "0",  # tests of the grace period set their own
        **(env or {}),
    }
    with log.open("wb") as stream:
        process = subprocess.Popen(
            [sys.executable, "-m", "mmaas.server"],
            env=full_env,
            stdout=stream,
            stderr=subprocess.STDOUT,
        )
    return RunningServer(process, port, metrics_port, log, tls, http_port)


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Callable[..., RunningServer]]:
    """``start_server(model_dir, wait=True, tls=None, **MMAAS_env)``: servers stopped at
    teardown."""
    started: list[RunningServer] = []

    def start(
        model_dir: Path, wait: bool = True, tls: ClientTls | None = None, **env: str
    ) -> RunningServer:
        server = launch(model_dir, tmp_path / f"server-{len(started)}.log", env, tls)
        started.append(server)
        if wait:
            server.wait_serving()
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def module_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., RunningServer]]:
    """Like ``start_server`` but the servers live for the whole test module."""
    started: list[RunningServer] = []
    logs = tmp_path_factory.mktemp("logs")

    def start(model_dir: Path, **env: str) -> RunningServer:
        server = launch(model_dir, logs / f"server-{len(started)}.log", env)
        started.append(server)
        server.wait_serving()
        return server

    yield start
    for server in started:
        server.stop()


def _compiled_source(factory: pytest.TempPathFactory, source: Path, info: ModelInfo) -> Path:
    return compile_model_dir(source, info, factory.mktemp(info.name) / "model")


def compiled_graph(
    factory: pytest.TempPathFactory, build: Callable[[], tuple[onnx.ModelProto, ModelInfo]]
) -> Path:
    """The model directory of one of :mod:`.graphs`' models, compiled by the builder stage."""
    model, info = build()
    source = factory.mktemp(info.name) / "model.onnx"
    onnx.save(model, source)
    return _compiled_source(factory, source, info)


@pytest.fixture(scope="session")
def det_dir(ppocr_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PP-OCRv4 detection compiled for 1x3x32x32 .. 4x3x1280x1280."""
    return _compiled_source(tmp_path_factory, ppocr_models["ppocr-det"], graphs.ppocr_det_info())


@pytest.fixture(scope="session")
def cls_dir(ppocr_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PP-OCR direction classifier compiled for batch 1..32."""
    return _compiled_source(tmp_path_factory, ppocr_models["ppocr-cls"], graphs.ppocr_cls_info())


@pytest.fixture(scope="session")
def datatypes_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compiled_graph(tmp_path_factory, graphs.datatypes_model)


@pytest.fixture(scope="session")
def integers_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compiled_graph(tmp_path_factory, graphs.integers_model)


@pytest.fixture(scope="session")
def strings_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compiled_graph(tmp_path_factory, graphs.strings_model)


@pytest.fixture(scope="session")
def two_outputs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compiled_graph(tmp_path_factory, graphs.two_outputs_model)


@pytest.fixture(scope="session")
def mistakes_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compiled_graph(tmp_path_factory, graphs.mistakes_model)


@pytest.fixture(scope="session")
def silero_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """silero-vad (the real model, :mod:`real_models`) compiled for 1..4 streams."""
    return _compiled_source(tmp_path_factory, silero_vad(), silero_info())


@pytest.fixture(scope="session")
def large_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compiled_graph(tmp_path_factory, graphs.large_model)
