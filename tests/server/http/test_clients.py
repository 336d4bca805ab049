"""The HTTP/REST front end against the real server (subprocess) with real clients nobody
here wrote: tritonclient.http (sync and aio, binary and JSON tensors) and curl; answers
are compared bit for bit with in-process ONNX Runtime and with the gRPC front end, and
both front ends count into the same statistics."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton
import tritonclient.http.aio as triton_aio
from tritonclient.utils import InferenceServerException

from tls import make_certificates

from ..conftest import ClientTls, RunningServer

CLS_OUTPUT = "save_infer_model/scale_0.tmp_1"
CURL = shutil.which("curl")


@pytest.fixture(scope="module")
def cls_server(module_server, cls_dir: Path) -> RunningServer:
    return module_server(cls_dir)


def reference(source: Path, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    return ort.InferenceSession(str(source), providers=["CPUExecutionProvider"]).run(None, inputs)


def http_input(
    name: str, array: np.ndarray, datatype: str, binary: bool = True
) -> triton.InferInput:
    tensor = triton.InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(array, binary_data=binary)
    return tensor


def curl(*args: str) -> subprocess.CompletedProcess[str]:
    assert CURL, "curl is not installed (scripts/setup.sh installs it)"
    return subprocess.run([CURL, "-sS", *args], capture_output=True, text=True, timeout=60)


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
    assert sorted(server["extensions"]) == sorted(
        [*grpc_extensions, "binary_tensor_data", "generate"]
    )
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


def test_every_datatype_round_trips_as_json_and_binary(module_server, datatypes_dir: Path) -> None:
    server = module_server(datatypes_dir)
    client = triton.InferenceServerClient(server.http_url)
    arrays = {
        "a": np.array([[0.5, -1.25, 3, 32000]] * 2, np.float16),
        "b": np.array([[2**62, -(2**62), 0, 1]] * 2, np.int64),
        "c": np.array([[2**30, -(2**30), 0, 1]] * 2, np.int32),
        "d": np.array([[True, False, True, False]] * 2),
        "e": np.array([[0, 255, 7, 1]] * 2, np.uint8),
    }
    types = {"a": "FP16", "b": "INT64", "c": "INT32", "d": "BOOL", "e": "UINT8"}
    expected = {
        "a_out": arrays["a"] * 2,
        "b_out": -arrays["b"],
        "c_out": arrays["c"] * 2,
        "d_out": ~arrays["d"],
        "e_out": arrays["e"],
    }
    for binary in (True, False):
        inputs = [http_input(n, a, types[n], binary) for n, a in arrays.items()]
        outputs = [triton.InferRequestedOutput(n, binary_data=binary) for n in expected]
        result = client.infer("datatypes", inputs, outputs=outputs)
        for name, array in expected.items():
            got = result.as_numpy(name)
            assert got.dtype == array.dtype, name
            np.testing.assert_array_equal(got, array)


def test_bytes_as_json_and_binary(module_server, strings_dir: Path) -> None:
    server = module_server(strings_dir)
    client = triton.InferenceServerClient(server.http_url)
    words = np.array(["héllo".encode(), b"", b"x" * 300], dtype=object)
    for binary in (True, False):
        result = client.infer(
            "strings",
            [http_input("text", words, "BYTES", binary)],
            outputs=[triton.InferRequestedOutput("same", binary_data=binary)],
        )
        got = result.as_numpy("same").tolist()  # tritonclient gives JSON strings as str
        assert got == (words.tolist() if binary else [w.decode() for w in words])


def test_requested_outputs_mixed_binary_and_json(module_server, two_outputs_dir: Path) -> None:
    server = module_server(two_outputs_dir)
    client = triton.InferenceServerClient(server.http_url)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    outputs = [
        triton.InferRequestedOutput("scores", binary_data=False),
        triton.InferRequestedOutput("boxes", binary_data=True),
    ]
    result = client.infer("two-outputs", [http_input("x", x, "FP32")], outputs=outputs)
    assert [o["name"] for o in result.get_response()["outputs"]] == ["scores", "boxes"]
    np.testing.assert_array_equal(result.as_numpy("boxes"), 2 * x)
    np.testing.assert_array_equal(result.as_numpy("scores"), x.sum(axis=1, keepdims=True))
    only = client.infer(
        "two-outputs", [http_input("x", x, "FP32")], outputs=[triton.InferRequestedOutput("scores")]
    )
    assert [o["name"] for o in only.get_response()["outputs"]] == ["scores"]
    with pytest.raises(InferenceServerException) as info:
        client.infer(
            "two-outputs",
            [http_input("x", x, "FP32")],
            outputs=[triton.InferRequestedOutput("nope")],
        )
    assert info.value.status() == "400" and "unknown output 'nope'" in info.value.message()


def test_tls_and_mutual_tls_apply_to_the_http_port(
    start_server, two_outputs_dir: Path, tmp_path: Path
) -> None:
    certs = make_certificates(tmp_path)
    env = {"MMAAS_TLS_CERT": str(certs["server"]), "MMAAS_TLS_KEY": str(certs["server-key"])}
    server = start_server(two_outputs_dir, tls=ClientTls(certs["ca"]), **env)
    url = f"https://{server.http_url}/v2/health/ready"
    assert json.loads(curl("-f", "--cacert", str(certs["ca"]), url).stdout) == {"ready": True}
    assert curl("-f", f"http://{server.http_url}/v2/health/ready").returncode != 0
    mutual = start_server(
        two_outputs_dir,
        tls=ClientTls(certs["ca"], cert=certs["client"], key=certs["client-key"]),
        MMAAS_TLS_CLIENT_CA=str(certs["ca"]),
        **env,
    )
    url = f"https://{mutual.http_url}/v2/health/ready"
    identity = ["--cert", str(certs["client"]), "--key", str(certs["client-key"])]
    assert curl("-f", "--cacert", str(certs["ca"]), *identity, url).returncode == 0
    assert curl("-f", "--cacert", str(certs["ca"]), url).returncode != 0


def test_http_requests_are_batched_and_limited_by_the_same_scheduler(
    start_server, two_outputs_dir: Path
) -> None:
    server = start_server(
        two_outputs_dir,
        MMAAS_DYNAMIC_BATCHING="true",
        MMAAS_MAX_QUEUE_DELAY_US="200000",
        MMAAS_PREFERRED_BATCH_SIZES="8",
    )
    rows = [np.full((1, 4), i, np.float32) for i in range(8)]

    async def burst() -> list[np.ndarray]:
        client = triton_aio.InferenceServerClient(server.http_url)
        try:
            calls = [client.infer("two-outputs", [http_input("x", r, "FP32")]) for r in rows]
            return [result.as_numpy("boxes") for result in await asyncio.gather(*calls)]
        finally:
            await client.close()

    answers = asyncio.run(burst())
    for row, boxes in zip(rows, answers, strict=True):
        np.testing.assert_array_equal(boxes, 2 * row)  # each caller gets its own row back
    stats = triton.InferenceServerClient(server.http_url).get_inference_statistics("two-outputs")
    model = stats["model_stats"][0]
    assert model["inference_count"] == 8 and model["execution_count"] < 8
    assert any(batch["batch_size"] > 1 for batch in model["batch_stats"])


def test_http_probes_during_sigterm(start_server, two_outputs_dir: Path) -> None:
    """SIGTERM: /v2/health/ready turns 503 at once while the port stays open for the grace
    period (live stays 200, a new infer is a 503 KServe error), then the server exits 0."""
    server = start_server(two_outputs_dir, MMAAS_SHUTDOWN_GRACE_S="3")
    base = f"http://{server.http_url}"
    server.process.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    while (
        curl("-s", "-o", "/dev/null", "-w", "%{http_code}", f"{base}/v2/health/ready").stdout
        != "503"
    ):
        assert time.monotonic() - signalled < 2, "ready did not turn 503 at once"
        time.sleep(0.05)
    assert json.loads(curl("-f", f"{base}/v2/health/live").stdout) == {"live": True}
    client = triton.InferenceServerClient(server.http_url)
    with pytest.raises(InferenceServerException) as refused:
        client.infer("two-outputs", [http_input("x", np.ones((1, 4), np.float32), "FP32")])
    assert refused.value.status() == "503" and "shutting down" in refused.value.message()
    assert server.process.wait(30) == 0
    assert time.monotonic() - signalled >= 3  # the port stayed open for the grace period
