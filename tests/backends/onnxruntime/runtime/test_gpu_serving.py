"""The real server on the GPU, talked to by real clients: ``mmaas serve`` of the ppocr-det
GPU variant (2 instances, dynamic batching, CUDA graphs) answered by tritonclient, its
ModelConfig ``KIND_GPU`` on GPU 0 over gRPC and HTTP, CUDA shared memory registered by
tritonclient.utils.cuda_shared_memory over gRPC and by CUDA IPC handle over HTTP (inputs
read and outputs written on the device), concurrent requests mixing raw and CUDA shared
memory batched together, perf_analyzer ``--shared-memory cuda``; the qwen-vl vision engine
served alone refusing a grid that does not fit; and ``mmaas doctor``'s GPU line and its
refusal without a visible GPU.

Marked ``gpu`` (skipped without a GPU); scripts/gpu_run.sh runs them on the H200.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as triton
from scripts.gpu_models import write_gpu_model
from scripts.gpu_serve_check import Server
from test_gpu import DET_ONNX, FP32_ATOL, HAS_GPU, det_batch, qwen_inputs
from tritonclient.utils import InferenceServerException

from paths import ROOT

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not HAS_GPU, reason="needs an NVIDIA GPU and onnxruntime-gpu"),
]
OUT = "sigmoid_0.tmp_0"
OUT_BYTES = 640 * 640 * 4


@pytest.fixture(scope="module")
def det(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("det") / "ppocr-det"
    write_gpu_model(ROOT / "models/ppocr-det", folder, max_batch=8, preferred=(4, 8))
    server = Server(folder, folder.parent / "server.log", {"MMAAS_INSTANCE_COUNT": "2"})
    server.wait_ready()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def cpu() -> ort.InferenceSession:
    return ort.InferenceSession(str(DET_ONNX), providers=["CPUExecutionProvider"])


def test_the_config_says_kind_gpu_on_gpu_0_over_grpc_and_http(det: Server) -> None:
    (group,) = det.client.get_model_config("ppocr-det").config.instance_group
    assert (group.Kind.Name(group.kind), list(group.gpus), group.count) == ("KIND_GPU", [0], 2)
    url = f"http://127.0.0.1:{det.http}/v2/models/ppocr-det/config"
    with urllib.request.urlopen(url, timeout=10) as answer:
        (http_group,) = json.loads(answer.read())["instance_group"]
    assert http_group["kind"] == "KIND_GPU" and http_group["gpus"] == [0]


def cuda_region(name: str, size: int) -> object:
    import tritonclient.utils.cuda_shared_memory as cudashm

    return cudashm.create_shared_memory_region(name, size, 0)


def test_cuda_shared_memory_in_and_out_over_grpc(det: Server, cpu: ort.InferenceSession) -> None:
    import tritonclient.utils.cuda_shared_memory as cudashm

    x = det_batch(1, seed=31)["x"]
    regions = {
        "det_in": cuda_region("det_in", x.nbytes),
        "det_out": cuda_region("det_out", OUT_BYTES),
    }
    try:
        cudashm.set_shared_memory_region(regions["det_in"], [x])
        for name, handle in regions.items():
            size = x.nbytes if name == "det_in" else OUT_BYTES
            det.client.register_cuda_shared_memory(name, cudashm.get_raw_handle(handle), 0, size)
        status = det.client.get_cuda_shared_memory_status().regions
        assert {n: (r.device_id, r.byte_size) for n, r in status.items()} == {
            "det_in": (0, x.nbytes), "det_out": (0, OUT_BYTES)}  # fmt: skip
        tensor = triton.InferInput("x", list(x.shape), "FP32")
        tensor.set_shared_memory("det_in", x.nbytes)
        wanted = triton.InferRequestedOutput(OUT)
        wanted.set_shared_memory("det_out", OUT_BYTES)
        result = det.client.infer("ppocr-det", [tensor], outputs=[wanted])
        (sent,) = result.get_response().outputs
        assert list(sent.shape) == [1, 1, 640, 640]
        assert list(result.get_response().raw_output_contents) == [b""]  # in the region
        out = cudashm.get_contents_as_numpy(regions["det_out"], np.float32, [1, 1, 640, 640])
        assert np.abs(out - cpu.run([OUT], {"x": x})[0]).max() <= FP32_ATOL
        small = triton.InferRequestedOutput(OUT)
        small.set_shared_memory("det_out", OUT_BYTES - 4)
        with pytest.raises(InferenceServerException, match="needs 1638400 bytes"):
            det.client.infer("ppocr-det", [tensor], outputs=[small])
    finally:
        det.client.unregister_cuda_shared_memory()
        for handle in regions.values():
            cudashm.destroy_shared_memory_region(handle)
    assert det.client.get_cuda_shared_memory_status().regions == {}


def test_cuda_shared_memory_registered_over_http_serves_grpc(
    det: Server, cpu: ort.InferenceSession
) -> None:
    import tritonclient.utils.cuda_shared_memory as cudashm

    x = det_batch(1, seed=32)["x"]
    handle = cuda_region("http_in", x.nbytes)
    base = f"http://127.0.0.1:{det.http}/v2/cudasharedmemory"
    try:
        cudashm.set_shared_memory_region(handle, [x])
        encoded = cudashm.get_raw_handle(handle).decode()  # base64 of the 64-byte handle
        assert len(base64.b64decode(encoded)) == 64
        body = {"raw_handle": {"b64": encoded}, "device_id": 0, "byte_size": x.nbytes}
        request = urllib.request.Request(
            f"{base}/region/http_in/register", json.dumps(body).encode()
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 200
        with urllib.request.urlopen(f"{base}/status", timeout=10) as answer:
            assert json.loads(answer.read()) == [
                {"name": "http_in", "device_id": 0, "byte_size": x.nbytes}]  # fmt: skip
        tensor = triton.InferInput("x", list(x.shape), "FP32")
        tensor.set_shared_memory("http_in", x.nbytes)
        out = det.client.infer("ppocr-det", [tensor]).as_numpy(OUT)
        assert np.abs(out - cpu.run([OUT], {"x": x})[0]).max() <= FP32_ATOL
    finally:
        urllib.request.urlopen(urllib.request.Request(f"{base}/unregister", b""), timeout=10)
        cudashm.destroy_shared_memory_region(handle)


def test_concurrent_raw_and_cuda_requests_are_batched_and_each_gets_its_rows(
    det: Server, cpu: ort.InferenceSession
) -> None:
    import tritonclient.utils.cuda_shared_memory as cudashm

    inputs = [det_batch(1, seed=40 + i)["x"] for i in range(16)]
    handles = [cuda_region(f"c{i}", x.nbytes) for i, x in enumerate(inputs[:8])]
    for i, (handle, x) in enumerate(zip(handles, inputs, strict=False)):
        cudashm.set_shared_memory_region(handle, [x])
        det.client.register_cuda_shared_memory(f"c{i}", cudashm.get_raw_handle(handle), 0, x.nbytes)
    before = det.client.get_inference_statistics("ppocr-det").model_stats[0].execution_count

    def one(i: int) -> float:
        client = triton.InferenceServerClient(f"127.0.0.1:{det.grpc}")
        tensor = triton.InferInput("x", [1, 3, 640, 640], "FP32")
        if i < 8:
            tensor.set_shared_memory(f"c{i}", inputs[i].nbytes)
        else:
            tensor.set_data_from_numpy(inputs[i])
        out = client.infer("ppocr-det", [tensor]).as_numpy(OUT)
        return float(np.abs(out - cpu.run([OUT], {"x": inputs[i]})[0]).max())

    try:
        with ThreadPoolExecutor(16) as pool:
            worst = list(pool.map(one, range(16)))
    finally:
        det.client.unregister_cuda_shared_memory()
        for handle in handles:
            cudashm.destroy_shared_memory_region(handle)
    assert max(worst) <= FP32_ATOL
    stats = det.client.get_inference_statistics("ppocr-det").model_stats[0]
    assert stats.execution_count - before < 16  # some requests shared an execution


def test_perf_analyzer_with_cuda_shared_memory(det: Server) -> None:
    done = subprocess.run(
        [os.environ.get("MMAAS_PERF_ANALYZER", "perf_analyzer"), "-m", "ppocr-det", "-i", "grpc",
         "-u", f"127.0.0.1:{det.grpc}", "-b", "1", "--shape", "x:3,640,640",
         "--shared-memory", "cuda", "--output-shared-memory-size", str(OUT_BYTES),
         "--concurrency-range", "4", "-p", "1000", "--max-trials", "3",
         "--stability-percentage", "999"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Throughput:" in done.stdout and "Server:" in done.stdout, done.stdout
    assert det.client.get_cuda_shared_memory_status().regions == {}  # it cleaned up


def test_the_vision_engine_alone_on_the_gpu_refuses_a_grid_that_does_not_fit(
    tmp_path: Path,
) -> None:
    onnx = Path(os.environ.get("MMAAS_GPU_QWEN", ROOT / "models/qwen-vl/qwen2_vl_vision.onnx"))
    folder = write_gpu_model(ROOT / "models/qwen-vl", tmp_path / "qwen-vl", onnx=onnx)
    server = Server(folder, tmp_path / "server.log")
    try:
        server.wait_ready()
        good = qwen_inputs(3)
        embeds = server.infer("qwen-vl", good, ["image_embeds"])["image_embeds"]
        reference = ort.InferenceSession(str(onnx), providers=["CPUExecutionProvider"])
        expected = reference.run(["image_embeds"], good)[0]
        assert np.linalg.norm(embeds - expected) / np.linalg.norm(expected) <= 1e-4
        with pytest.raises(InferenceServerException, match=r"row 0 is \[2, 4, 3\]"):
            server.infer("qwen-vl", {**good, "grid_thw": np.array([[2, 4, 3]], np.int64)},
                         ["image_embeds"])  # fmt: skip
    finally:
        server.stop()


def test_doctor_reports_the_cuda_provider_driver_and_cuda_versions() -> None:
    from mmaas.backends.onnxruntime.host.doctor import cuda_provider, driver_facts

    line, problem = cuda_provider()
    facts = driver_facts()
    assert line.startswith("CUDAExecutionProvider (onnxruntime-gpu built for CUDA 1")
    assert f"driver {facts['driver']} (CUDA {facts['cuda']})" in line
    assert problem is None and line.endswith("a CUDA session runs here")


def test_doctor_exits_1_naming_why_when_no_gpu_is_visible() -> None:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(
        [sys.executable, "-m", "mmaas", "doctor", "--json"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(done.stdout)
    check = next(c for c in report["checks"] if c["name"] == "onnxruntime")
    status = next(b for b in report["backends"] if b["name"] == "onnxruntime")
    assert not check["ok"] and "NO CUDA session" in check["detail"]
    assert status["reason"].startswith("onnxruntime-gpu cannot create a CUDA session here (")
    assert "no CUDA-capable device" in status["reason"], status["reason"]
