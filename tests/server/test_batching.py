"""Scheduling against the real server: dynamic batching (observed through the Triton
metrics), per-caller rows, unbatchable requests, queue limit, deadlines, instances."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnxruntime as ort
import tritonclient.grpc as triton
from tritonclient.utils import InferenceServerException

from .conftest import RunningServer

StartServer = Callable[..., RunningServer]
CLS_OUT = "save_infer_model/scale_0.tmp_1"
DET_OUT = "sigmoid_0.tmp_0"


def infer(server: RunningServer, model: str, array: np.ndarray, **options: object) -> np.ndarray:
    tensor = triton.InferInput("x", list(array.shape), "FP32")
    tensor.set_data_from_numpy(array)
    result = server.client().infer(model, [tensor], **options)
    return result.as_numpy(CLS_OUT if model == "ppocr-cls" else DET_OUT)


def assert_concurrent_results_match_onnxruntime(
    server: RunningServer, model: str, source: Path, images: list[np.ndarray]
) -> None:
    """Send ``images`` at once (one thread each) to ``model`` and compare every caller's
    result with ONNX Runtime on ``source`` (atol 1e-4)."""
    with ThreadPoolExecutor(len(images)) as pool:
        results = list(pool.map(lambda image: infer(server, model, image), images))
    session = ort.InferenceSession(str(source))
    for image, got in zip(images, results, strict=True):
        np.testing.assert_allclose(got, session.run(None, {"x": image})[0], atol=1e-4)


def status_of(call: Callable[[], object]) -> str:
    try:
        call()
    except InferenceServerException as exc:
        return str(exc.status()).removeprefix("StatusCode.")
    return "OK"


def test_concurrent_requests_are_batched_and_each_caller_gets_its_rows(
    start_server: StartServer, cls_dir: Path, ppocr_models: dict[str, Path]
) -> None:
    server = start_server(
        cls_dir,
        MMAAS_DYNAMIC_BATCHING="true",
        MMAAS_MAX_QUEUE_DELAY_US="200000",
        MMAAS_PREFERRED_BATCH_SIZES="8",
    )
    rng = np.random.default_rng(5)
    images = [rng.random((1, 3, 48, 192), dtype=np.float32) for _ in range(16)]
    assert_concurrent_results_match_onnxruntime(
        server, "ppocr-cls", ppocr_models["ppocr-cls"], images
    )
    labels = {"model": "ppocr-cls", "version": "1"}
    assert server.metric("nv_inference_count", **labels) == 16
    assert server.metric("nv_inference_request_success", **labels) == 16
    executions = server.metric("nv_inference_exec_count", **labels)
    assert executions <= 4, f"16 concurrent rows ran in {executions} executions: no batching"
    assert server.metric("mmaas_batch_size_bucket", le="1", **labels) < executions
    config = server.client().get_model_config("ppocr-cls").config
    assert list(config.dynamic_batching.preferred_batch_size) == [8]


def test_requests_of_different_shapes_run_apart_and_stay_correct(
    start_server: StartServer, det_dir: Path, ppocr_models: dict[str, Path]
) -> None:
    server = start_server(det_dir, MMAAS_DYNAMIC_BATCHING="true", MMAAS_MAX_QUEUE_DELAY_US="100000")
    rng = np.random.default_rng(6)
    images = [rng.random((1, 3, 64, 64 + 32 * (i % 2)), dtype=np.float32) for i in range(4)]
    assert_concurrent_results_match_onnxruntime(
        server, "ppocr-det", ppocr_models["ppocr-det"], images
    )
    assert server.metric("nv_inference_exec_count", model="ppocr-det") >= 2


def slow_det_request(server: RunningServer) -> np.ndarray:
    """A request that keeps the one instance busy for seconds (4x3x1280x1280)."""
    return infer(server, "ppocr-det", np.zeros((4, 3, 1280, 1280), np.float32))


def wait_inflight(server: RunningServer, count: int, timeout: float = 60.0) -> None:
    """Wait until the server holds ``count`` requests (received, queued or computing)."""
    deadline = time.monotonic() + timeout
    while server.metric("mmaas_inflight_requests") < count:
        assert time.monotonic() < deadline, f"never {count} requests in flight"
        time.sleep(0.05)


def test_full_queue_is_refused_at_once(start_server: StartServer, det_dir: Path) -> None:
    server = start_server(det_dir, MMAAS_MAX_QUEUE_SIZE="1")
    small = np.zeros((1, 3, 32, 32), np.float32)
    with ThreadPoolExecutor(4) as pool:
        slow = pool.submit(slow_det_request, server)
        wait_inflight(server, 1)  # the slow request now runs; the queue is empty
        statuses = list(
            pool.map(lambda _: status_of(lambda: infer(server, "ppocr-det", small)), range(3))
        )
        slow.result()
    assert statuses.count("RESOURCE_EXHAUSTED") >= 1 and "OK" in statuses, statuses
    assert server.metric("nv_inference_request_failure", reason="REJECTED") >= 1


def test_expired_request_is_not_computed(start_server: StartServer, det_dir: Path) -> None:
    server = start_server(det_dir)
    small = np.zeros((1, 3, 32, 32), np.float32)
    with ThreadPoolExecutor(2) as pool:
        slow = pool.submit(slow_det_request, server)
        wait_inflight(server, 1)
        late = status_of(lambda: infer(server, "ppocr-det", small, client_timeout=0.3))
        slow.result()
    assert late == "DEADLINE_EXCEEDED"
    time.sleep(0.3)
    assert server.metric("nv_inference_count", model="ppocr-det") == 4  # the slow rows only
    assert server.metric("nv_inference_exec_count", model="ppocr-det") == 1


def test_a_slow_request_does_not_block_another_instance(
    start_server: StartServer, det_dir: Path
) -> None:
    server = start_server(det_dir, MMAAS_INSTANCE_COUNT="2")
    finished: dict[str, float] = {}

    def timed(name: str, call: Callable[[], object]) -> None:
        call()
        finished[name] = time.monotonic()

    small = np.zeros((1, 3, 32, 32), np.float32)
    with ThreadPoolExecutor(2) as pool:
        slow = pool.submit(timed, "slow", lambda: slow_det_request(server))
        wait_inflight(server, 1)
        fast = pool.submit(timed, "fast", lambda: infer(server, "ppocr-det", small))
        slow.result(), fast.result()
    assert finished["fast"] < finished["slow"]
    assert server.client().get_model_config("ppocr-det").config.instance_group[0].count == 2
    assert "instance 1 loaded with 1 threads" in server.stderr()
