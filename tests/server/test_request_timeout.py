"""Triton's standard request parameters ``timeout`` (microseconds, the request's deadline)
and ``priority`` (accepted, no priority levels) through real tritonclient gRPC and HTTP
clients against the real server."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpc_client
import tritonclient.http as http_client
from tritonclient.utils import InferenceServerException

from .conftest import RunningServer
from .test_batching import slow_det_request, wait_inflight

DET_OUT = "sigmoid_0.tmp_0"
SMALL = np.zeros((1, 3, 32, 32), np.float32)


@pytest.fixture(scope="module")
def server(module_server: Callable[..., RunningServer], det_dir: Path) -> RunningServer:
    return module_server(det_dir)


def grpc_infer(server: RunningServer, **options: object) -> np.ndarray:
    tensor = grpc_client.InferInput("x", list(SMALL.shape), "FP32")
    tensor.set_data_from_numpy(SMALL)
    return server.client().infer("ppocr-det", [tensor], **options).as_numpy(DET_OUT)


def http_infer(server: RunningServer, **options: object) -> np.ndarray:
    tensor = http_client.InferInput("x", list(SMALL.shape), "FP32")
    tensor.set_data_from_numpy(SMALL)
    client = http_client.InferenceServerClient(server.http_url)
    return client.infer("ppocr-det", [tensor], **options).as_numpy(DET_OUT)


def refusal(call: Callable[[], object]) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as caught:
        call()
    return caught.value


@pytest.mark.parametrize("infer", [grpc_infer, http_infer])
def test_timeout_and_priority_are_accepted(
    server: RunningServer, infer: Callable[..., np.ndarray]
) -> None:
    plain = infer(server)
    np.testing.assert_array_equal(infer(server, timeout=5_000_000, priority=1), plain)
    np.testing.assert_array_equal(infer(server, timeout=0, priority=0), plain)


@pytest.mark.parametrize(
    ("infer", "status"), [(grpc_infer, "StatusCode.DEADLINE_EXCEEDED"), (http_infer, "504")]
)
def test_a_timeout_that_passes_while_queued_is_the_deadline_error(
    server: RunningServer, infer: Callable[..., np.ndarray], status: str
) -> None:
    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(slow_det_request, server)
        wait_inflight(server, 1)
        late = refusal(lambda: infer(server, timeout=300_000))  # 0.3 s, while queued
        slow.result()
    assert str(late.status()) == status
    assert "deadline passed while it was queued" in str(late.message())


def test_negative_priority_and_timeout_are_refused(server: RunningServer) -> None:
    refused = refusal(lambda: http_infer(server, priority=-1))
    assert refused.status() == "400"
    assert "'priority' must be a non-negative integer" in str(refused.message())
    refused = refusal(lambda: grpc_infer(server, timeout=-5))
    assert str(refused.status()) == "StatusCode.INVALID_ARGUMENT"
    assert "'timeout' must be a non-negative integer in microseconds" in str(refused.message())
    refused = refusal(lambda: http_infer(server, timeout="soon"))
    assert refused.status() == "400"


def test_other_unknown_parameters_stay_refused(server: RunningServer) -> None:
    refused = refusal(lambda: http_infer(server, parameters={"sequence_idx": 3}))
    assert refused.status() == "400"
    assert "unknown request parameter 'sequence_idx'" in str(refused.message())
    assert "timeout, priority" in str(refused.message())
