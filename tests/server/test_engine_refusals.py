"""A request the engine refuses for its values is the client's mistake: ONNX Runtime's
INVALID_ARGUMENT is answered gRPC INVALID_ARGUMENT / HTTP 400 with one log line and no
traceback (as Triton's ONNX Runtime back end), and in a dynamic batch only the request
at fault fails. Real model: silero-vad, whose 8 kHz branch takes at most 351 samples a
chunk, sent 576 (inside the profile); real clients: tritonclient gRPC and HTTP, curl."""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from tritonclient.utils import InferenceServerException

from . import graphs
from .conftest import RunningServer, compiled_graph
from .http.helpers import curl

StartServer = Callable[..., RunningServer]
REFUSED = "the engine refused this request's values (ONNX Runtime INVALID_ARGUMENT"


def silero_inputs(module, rate: int, samples: int) -> list:
    """silero-vad's three inputs for ``module`` (tritonclient.grpc or .http): one stream
    of ``samples`` zeros, a zero state and the sample rate as Triton sends a scalar, [1]."""
    arrays = {
        "input": np.zeros((1, samples), np.float32),
        "state": np.zeros((2, 1, 128), np.float32),
        "sr": np.array([rate], np.int64),
    }
    tensors = []
    for name, array in arrays.items():
        tensor = module.InferInput(name, list(array.shape), "INT64" if name == "sr" else "FP32")
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    return tensors


@pytest.fixture(scope="module")
def lookup_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compiled_graph(tmp_path_factory, graphs.lookup_model)


@pytest.fixture(scope="module")
def silero(module_server: Callable[..., RunningServer], silero_dir: Path) -> RunningServer:
    return module_server(silero_dir)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_values_the_engine_refuses_are_the_clients_mistake(
    silero: RunningServer, protocol: str
) -> None:
    module, url = (
        (triton_grpc, silero.url) if protocol == "grpc" else (triton_http, silero.http_url)
    )
    client = module.InferenceServerClient(url)
    logged = len(silero.stderr().splitlines())
    with pytest.raises(InferenceServerException) as info:
        client.infer("silero-vad", silero_inputs(module, 8000, 576))
    status = "StatusCode.INVALID_ARGUMENT" if protocol == "grpc" else "400"
    assert str(info.value.status()) == status
    assert REFUSED in info.value.message() and "LSTM" in info.value.message()
    lines = silero.stderr().splitlines()[logged:]
    assert len(lines) == 1 and "request failed: INVALID_ARGUMENT" in lines[0], lines
    assert "Traceback" not in silero.stderr()
    speech = client.infer("silero-vad", silero_inputs(module, 16000, 576)).as_numpy("output")
    assert speech.shape == (1, 1) and 0 <= float(speech[0, 0]) <= 1  # the server goes on
    stats = silero.client().get_inference_statistics("silero-vad").model_stats[0]
    assert stats.inference_stats.fail.count >= 1


def test_curl_gets_400_with_the_engines_reason(silero: RunningServer) -> None:
    body = {
        "inputs": [
            {"name": "input", "datatype": "FP32", "shape": [1, 576], "data": [0.0] * 576},
            {"name": "state", "datatype": "FP32", "shape": [2, 1, 128], "data": [0.0] * 256},
            {"name": "sr", "datatype": "INT64", "shape": [1], "data": [8000]},
        ]
    }
    url = f"http://{silero.http_url}/v2/models/silero-vad/infer"
    done = curl("-w", "\n%{http_code}", "-d", json.dumps(body), url)
    answer, _, code = done.stdout.rpartition("\n")
    assert code == "400", done.stdout
    assert REFUSED in json.loads(answer)["error"]


def test_in_a_dynamic_batch_only_the_request_at_fault_fails(
    start_server: StartServer, lookup_dir: Path
) -> None:
    server = start_server(
        lookup_dir,
        MMAAS_DYNAMIC_BATCHING="true",
        MMAAS_MAX_QUEUE_DELAY_US="300000",
        MMAAS_PREFERRED_BATCH_SIZES="8",
    )

    def ask(index: int) -> str | float:
        tensor = triton_grpc.InferInput("idx", [1, 1], "INT64")
        tensor.set_data_from_numpy(np.array([[index]], np.int64))
        try:
            return float(server.client().infer("lookup", [tensor]).as_numpy("value")[0, 0])
        except InferenceServerException as exc:
            return str(exc.status())

    def concurrently(indices: list[int]) -> list[str | float]:
        with ThreadPoolExecutor(len(indices)) as pool:
            return list(pool.map(ask, indices))

    labels = {"model": "lookup", "version": "1"}
    assert concurrently(list(range(8))) == [float(i) for i in range(8)]
    assert server.metric("mmaas_batch_size_bucket", le="1", **labels) < server.metric(
        "mmaas_batch_size_count", **labels
    ), "8 concurrent requests ran one by one: this set-up does not batch"
    refused = "StatusCode.INVALID_ARGUMENT"
    answers = concurrently([3, 100, 5, 1, -9, 7, 0, 2])  # 100 and -9: outside the table
    assert answers == [3.0, refused, 5.0, 1.0, refused, 7.0, 0.0, 2.0]
    assert "Traceback" not in server.stderr()
