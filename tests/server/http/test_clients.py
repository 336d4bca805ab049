"""The HTTP/REST front end against the real server (subprocess) with real clients nobody
here wrote: tritonclient.http (sync and aio, binary and JSON tensors) and curl, on the
PP-OCR direction classifier; answers are compared bit for bit with in-process ONNX Runtime
and with the gRPC front end, and both front ends count into the same statistics."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton
import tritonclient.http.aio as triton_aio

from ..conftest import RunningServer
from .helpers import CURL, curl, http_input

CLS_OUTPUT = "save_infer_model/scale_0.tmp_1"


@pytest.fixture(scope="module")
def cls_server(module_server, cls_dir: Path) -> RunningServer:
    return module_server(cls_dir)


def reference(source: Path, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    return ort.InferenceSession(str(source), providers=["CPUExecutionProvider"]).run(None, inputs)


@pytest.mark.parametrize("binary_in", [True, False])
@pytest.mark.parametrize("binary_out", [True, False, None])
def test_tritonclient_http_sync_is_bit_exact_with_onnxruntime(
    cls_server: RunningServer,
    ppocr_models: dict[str, Path],
    binary_in: bool,
    binary_out: bool | None,
) -> None:
    batch = np.random.default_rng(3).random((3, 3, 48, 192), dtype=np.float32)
    client = triton.InferenceServerClient(cls_server.http_url)
    outputs = (
        None
        if binary_out is None
        else [triton.InferRequestedOutput(CLS_OUTPUT, binary_data=binary_out)]
    )
    result = client.infer(
        "ppocr-cls", [http_input("x", batch, "FP32", binary_in)], outputs=outputs, request_id="r-7"
    )
    expected = reference(ppocr_models["ppocr-cls"], {"x": batch})[0]
    np.testing.assert_array_equal(result.as_numpy(CLS_OUTPUT), expected)
    response = result.get_response()
    assert response["id"] == "r-7" and response["model_name"] == "ppocr-cls"


def test_tritonclient_http_aio_and_grpc_give_the_same_bytes(cls_server: RunningServer) -> None:
    batch = np.random.default_rng(4).random((2, 3, 48, 192), dtype=np.float32)

    async def over_http() -> np.ndarray:
        client = triton_aio.InferenceServerClient(cls_server.http_url)
        try:
            assert await client.is_server_live() and await client.is_server_ready()
            assert await client.is_model_ready("ppocr-cls")
            result = await client.infer("ppocr-cls", [http_input("x", batch, "FP32")])
            return result.as_numpy(CLS_OUTPUT)
        finally:
            await client.close()

    tensor = triton_grpc.InferInput("x", list(batch.shape), "FP32")
    tensor.set_data_from_numpy(batch)
    over_grpc = cls_server.client().infer("ppocr-cls", [tensor]).as_numpy(CLS_OUTPUT)
    np.testing.assert_array_equal(asyncio.run(over_http()), over_grpc)


def test_metadata_config_and_statistics_match_grpc(cls_server: RunningServer) -> None:
    client = triton.InferenceServerClient(cls_server.http_url)
    grpc_client = cls_server.client()
    metadata = client.get_model_metadata("ppocr-cls")
    expected = grpc_client.get_model_metadata("ppocr-cls", as_json=True)
    assert metadata == expected | {"inputs": metadata["inputs"], "outputs": metadata["outputs"]}
    assert metadata["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 3, 48, 192]}]
    config = client.get_model_config("ppocr-cls")
    assert config["max_batch_size"] == 32 and config["input"][0]["dims"] == [3, 48, 192]
    assert config["input"][0]["data_type"] == "TYPE_FP32"
    server = client.get_server_metadata()
    assert server["name"] == "mmaas"
    grpc_extensions = list(grpc_client.get_server_metadata().extensions)
    assert server["extensions"] == grpc_extensions  # one list, as Triton answers both
    assert metadata["versions"] == ["1"]
    batch = np.zeros((1, 3, 48, 192), np.float32)
    before = client.get_inference_statistics("ppocr-cls")["model_stats"][0]
    client.infer("ppocr-cls", [http_input("x", batch, "FP32")])
    tensor = triton_grpc.InferInput("x", [1, 3, 48, 192], "FP32")
    tensor.set_data_from_numpy(batch)
    grpc_client.infer("ppocr-cls", [tensor])
    after = client.get_inference_statistics("ppocr-cls")["model_stats"][0]
    stats = after["inference_stats"]
    assert after["inference_count"] - before["inference_count"] == 2  # both front ends
    assert isinstance(after["inference_count"], int) and isinstance(stats["success"]["ns"], int)
    assert set(stats) >= {"success", "fail", "queue", "compute_infer", "cache_hit", "cache_miss"}
    assert cls_server.metric("nv_inference_request_success", model="ppocr-cls") >= 2


def test_curl_health_metadata_and_infer(cls_server: RunningServer, tmp_path: Path) -> None:
    base = f"http://{cls_server.http_url}"
    assert json.loads(curl("-f", f"{base}/v2/health/live").stdout) == {"live": True}
    assert json.loads(curl("-f", f"{base}/v2/health/ready").stdout) == {"ready": True}
    assert curl("-f", f"{base}/v2/models/ppocr-cls/ready").returncode == 0
    assert json.loads(curl("-f", f"{base}/v2/models/ppocr-cls").stdout)["name"] == "ppocr-cls"
    request = {
        "inputs": [
            {"name": "x", "datatype": "FP32", "shape": [1, 3, 48, 192], "data": [0.5] * 27648}
        ]
    }
    body = tmp_path / "request.json"
    body.write_text(json.dumps(request))
    answer = curl(
        "-f",
        "-H",
        "Content-Type: application/json",
        "--data-binary",
        f"@{body}",
        f"{base}/v2/models/ppocr-cls/infer",
    )
    output = json.loads(answer.stdout)["outputs"][0]
    assert output["name"] == CLS_OUTPUT and output["shape"] == [1, 2] and len(output["data"]) == 2
    index = json.loads(curl("-f", "-X", "POST", f"{base}/v2/repository/index").stdout)
    assert index == [{"name": "ppocr-cls", "version": "1", "state": "READY", "reason": ""}]


def test_raw_binary_request_and_gzip_body(
    cls_server: RunningServer, tmp_path: Path, ppocr_models
) -> None:
    batch = np.random.default_rng(5).random((1, 3, 48, 192), dtype=np.float32)
    expected = reference(ppocr_models["ppocr-cls"], {"x": batch})[0]
    raw = tmp_path / "raw.bin"
    raw.write_bytes(batch.tobytes())
    url = f"http://{cls_server.http_url}/v2/models/ppocr-cls/infer"
    answer = subprocess.run(
        [
            CURL or "curl",
            "-sS",
            "-f",
            "-D",
            "-",
            "-H",
            "Inference-Header-Content-Length: 0",
            "--data-binary",
            f"@{raw}",
            url,
        ],
        capture_output=True,
        timeout=60,
    )
    head, _, body = answer.stdout.partition(b"\r\n\r\n")
    length = int(
        next(
            line.split(b":")[1]
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"inference-header-content-length")
        )
    )
    assert json.loads(body[:length])["outputs"][0]["parameters"] == {"binary_data_size": 8}
    np.testing.assert_array_equal(np.frombuffer(body[length:], np.float32).reshape(1, 2), expected)
    client = triton.InferenceServerClient(cls_server.http_url)
    result = client.infer(
        "ppocr-cls", [http_input("x", batch, "FP32")], request_compression_algorithm="gzip"
    )
    np.testing.assert_array_equal(result.as_numpy(CLS_OUTPUT), expected)
    result = client.infer(
        "ppocr-cls", [http_input("x", batch, "FP32")], request_compression_algorithm="deflate"
    )
    np.testing.assert_array_equal(result.as_numpy(CLS_OUTPUT), expected)
