"""What operators touch: the Prometheus endpoint, SIGTERM draining under load, TLS and
mutual TLS with certificates made by openssl in the test, JSON logs with request ids."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as triton
from tritonclient.utils import InferenceServerException

from tls import make_certificates

from .conftest import ClientTls, RunningServer
from .test_batching import infer

StartServer = Callable[..., RunningServer]
TRITON_COUNTERS = (
    "nv_inference_request_success",
    "nv_inference_request_failure",
    "nv_inference_count",
    "nv_inference_exec_count",
    "nv_inference_request_duration_us",
    "nv_inference_queue_duration_us",
    "nv_inference_compute_input_duration_us",
    "nv_inference_compute_infer_duration_us",
    "nv_inference_compute_output_duration_us",
)


def x_input(rows: int = 1) -> triton.InferInput:
    tensor = triton.InferInput("x", [rows, 4], "FP32")
    tensor.set_data_from_numpy(np.ones((rows, 4), np.float32))
    return tensor


def test_metrics_use_triton_names_and_count_requests(
    start_server: StartServer, two_outputs_dir: Path
) -> None:
    server = start_server(two_outputs_dir)
    client = server.client()
    for _ in range(3):
        client.infer("two-outputs", [x_input(2)])
    with pytest.raises(InferenceServerException):
        client.infer("two-outputs", [x_input(9)])  # over the profile's max batch
    text = server.metrics()
    for name in TRITON_COUNTERS:
        assert f"# TYPE {name} counter" in text, name
    assert "# TYPE nv_inference_pending_request_count gauge" in text
    labels = {"model": "two-outputs", "version": "1"}
    assert server.metric("nv_inference_request_success", **labels) == 3
    assert server.metric("nv_inference_request_failure", reason="REJECTED", **labels) == 1
    assert server.metric("nv_inference_count", **labels) == 6
    assert server.metric("nv_inference_exec_count", **labels) == 3
    assert server.metric("nv_inference_compute_infer_duration_us", **labels) > 0
    assert server.metric("mmaas_batch_size_count", **labels) == 3


def wait_received(server: RunningServer, count: int, timeout: float = 60.0) -> None:
    """Wait until ``count`` requests reached the server (in flight or answered)."""
    deadline = time.monotonic() + timeout
    while (
        server.metric("mmaas_inflight_requests") + server.metric("nv_inference_request_success")
    ) < count:
        assert time.monotonic() < deadline, f"never {count} requests received"
        time.sleep(0.02)


def test_sigterm_during_load_loses_no_request(start_server: StartServer, det_dir: Path) -> None:
    server = start_server(det_dir, MMAAS_SHUTDOWN_GRACE_S="5")
    images = [np.full((1, 3, 640, 640), i / 10, np.float32) for i in range(8)]
    with ThreadPoolExecutor(len(images)) as pool:
        futures = [pool.submit(infer, server, "ppocr-det", image) for image in images]
        wait_received(server, len(images))
        pending = server.metric("mmaas_inflight_requests")
        server.process.terminate()  # SIGTERM by PID
        results = [future.result(timeout=120) for future in futures]
    assert pending >= 2, "SIGTERM came after the work was done: the test proves nothing"
    assert all(result.shape == (1, 1, 640, 640) for result in results)
    assert server.process.wait(60) == 0, server.stderr()
    assert "draining" in server.stderr() and "stopped" in server.stderr()


def test_json_logs_carry_the_request_id(start_server: StartServer, two_outputs_dir: Path) -> None:
    server = start_server(two_outputs_dir, MMAAS_LOG_FORMAT="json", MMAAS_LOG_LEVEL="debug")
    server.client().infer("two-outputs", [x_input()], request_id="req-42")
    deadline = time.monotonic() + 30  # the access line is written after the answer is sent
    while not (
        served := [line for line in json_lines(server) if line.get("request_id") == "req-42"]
    ):
        assert time.monotonic() < deadline, server.stderr()
        time.sleep(0.05)
    assert served and served[0]["status"] == "OK" and served[0]["duration_ms"] > 0


def json_lines(server: RunningServer) -> list[dict]:
    """The server's stderr so far, each complete line parsed as JSON (the last one may still be
    being written)."""
    *complete, _ = server.stderr().split("\n")
    return [json.loads(line) for line in complete if line]


def test_tls_and_mutual_tls(
    start_server: StartServer, two_outputs_dir: Path, tmp_path: Path
) -> None:
    certs = make_certificates(tmp_path)
    server_env = {"MMAAS_TLS_CERT": str(certs["server"]), "MMAAS_TLS_KEY": str(certs["server-key"])}
    tls = start_server(two_outputs_dir, tls=ClientTls(certs["ca"]), **server_env)
    assert tls.client().infer("two-outputs", [x_input()]).as_numpy("boxes").shape == (1, 4)
    plain = triton.InferenceServerClient(tls.url)
    with pytest.raises(InferenceServerException):
        plain.is_server_live()
    mutual = start_server(
        two_outputs_dir,
        tls=ClientTls(certs["ca"], cert=certs["client"], key=certs["client-key"]),
        MMAAS_TLS_CLIENT_CA=str(certs["ca"]),
        **server_env,
    )
    assert mutual.client().is_model_ready("two-outputs")
    anonymous = triton.InferenceServerClient(
        mutual.url, ssl=True, root_certificates=str(certs["ca"])
    )
    with pytest.raises(InferenceServerException):
        anonymous.is_server_live()
