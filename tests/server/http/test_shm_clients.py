"""System shared memory over HTTP and the real clients that need it, against the real
server: tritonclient.http's shm utilities (inputs read from and outputs written to
registered regions, bit-exact; status; unregister), the region checks (C27) as KServe
error bodies, CUDA shared memory refused naming why (no CUDA here) while its status and
unregister succeed, perf_analyzer -i http with and without --shared-memory system (exit 0,
non-zero server statistics, no /dev/shm object left behind), and the KServe SDK's REST
client."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.http as triton
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from ..conftest import RunningServer

OUTPUT = "save_infer_model/scale_0.tmp_1"
VENV = Path(sys.executable).parent
KSERVE_PYTHON = VENV.parent.parent / ".venv-kserve" / "bin" / "python"


@pytest.fixture(scope="module")
def server(module_server, cls_dir: Path) -> RunningServer:
    return module_server(cls_dir)


@pytest.fixture
def regions():
    """Create shm objects ``(name, size)``; destroyed (and unlinked) at teardown."""
    made = []

    def create(name: str, size: int):
        key = f"/mmaas-test-{uuid.uuid4().hex[:8]}-{name}"
        handle = shm.create_shared_memory_region(name, key, size)
        made.append(handle)
        return key, handle

    yield create
    for handle in made:
        shm.destroy_shared_memory_region(handle)


def shm_objects() -> set[str]:
    return {path.name for path in Path("/dev/shm").iterdir()}


def test_tritonclient_http_infers_through_shared_memory(server, regions, ppocr_models) -> None:
    batch = np.random.default_rng(8).random((2, 3, 48, 192), dtype=np.float32)
    expected = ort.InferenceSession(str(ppocr_models["ppocr-cls"])).run(None, {"x": batch})[0]
    client = triton.InferenceServerClient(server.http_url)
    in_key, in_handle = regions("in", batch.nbytes)
    out_key, out_handle = regions("out", expected.nbytes)
    shm.set_shared_memory_region(in_handle, [batch])
    client.register_system_shared_memory("in", in_key, batch.nbytes)
    client.register_system_shared_memory("out", out_key, expected.nbytes)
    status = client.get_system_shared_memory_status()
    assert {(r["name"], r["key"], r["byte_size"]) for r in status} == {
        ("in", in_key, batch.nbytes),
        ("out", out_key, expected.nbytes),
    }
    tensor = triton.InferInput("x", list(batch.shape), "FP32")
    tensor.set_shared_memory("in", batch.nbytes)
    output = triton.InferRequestedOutput(OUTPUT, binary_data=False)
    output.set_shared_memory("out", expected.nbytes)
    result = client.infer("ppocr-cls", [tensor], outputs=[output])
    assert result.get_response()["outputs"] == [
        {"name": OUTPUT, "datatype": "FP32", "shape": [2, 2]}
    ]
    got = shm.get_contents_as_numpy(out_handle, np.float32, [2, 2])
    np.testing.assert_array_equal(got, expected)
    client.unregister_system_shared_memory("out")
    assert [r["name"] for r in client.get_system_shared_memory_status()] == ["in"]
    client.unregister_system_shared_memory()
    assert client.get_system_shared_memory_status() == []


def test_region_checks_are_kserve_errors(server, regions) -> None:
    client = triton.InferenceServerClient(server.http_url)
    key, _ = regions("small", 64)

    def refused(call, *args, **kwargs) -> InferenceServerException:
        with pytest.raises(InferenceServerException) as info:
            call(*args, **kwargs)
        return info.value

    error = refused(client.register_system_shared_memory, "big", key, 128)
    assert error.status() == "400" and "holds 64 bytes" in error.message()
    error = refused(client.register_system_shared_memory, "past", key, 32, offset=48)
    assert "offset 48 + byte_size 32 = 80 bytes" in error.message()
    error = refused(client.register_system_shared_memory, "nokey", "/mmaas-no-such-key", 8)
    assert "Unable to open shared memory region" in error.message()
    client.register_system_shared_memory("small", key, 64)
    try:
        error = refused(client.register_system_shared_memory, "small", key, 64)
        assert "already in manager" in error.message()
        tensor = triton.InferInput("x", [1, 3, 48, 192], "FP32")
        tensor.set_shared_memory("small", 110592)
        error = refused(client.infer, "ppocr-cls", [tensor])
        assert error.status() == "400" and "passes its end" in error.message()
        input_key, _ = regions("input", 110592)
        client.register_system_shared_memory("input", input_key, 110592)
        tensor.set_shared_memory("input", 110592)
        output = triton.InferRequestedOutput(OUTPUT, binary_data=False)
        output.set_shared_memory("small", 4)
        error = refused(client.infer, "ppocr-cls", [tensor], outputs=[output])
        assert "needs 8 bytes" in error.message()
        error = refused(client.get_system_shared_memory_status, "nope")
        assert error.status() == "404"
    finally:
        client.unregister_system_shared_memory()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('"byte_size": 18446744073709551616', "'byte_size' of the register request is out of "
         "range: 1.8446744073709552e+19 is not in 0..18446744073709551615"),
        ('"byte_size": 8, "offset": 18446744073709551616', "'offset' of the register request"
         " is out of range"),
        ('"byte_size": 8, "offset": -99999999999999999999', "'offset' of the register request"
         " is out of range"),
        ('"byte_size": 18446744073709551615', "holds 64 bytes"),  # in range: the region's size
        ('"byte_size": 1.5', "'byte_size' of the register request must be an integer"),
        ('"byte_size": 8, "offset": -1', "offset -1 and byte_size 8 must be >= 0"),
    ],
)  # fmt: skip
def test_register_numbers_are_uint64(server, regions, body: str, message: str) -> None:
    key, _ = regions("numbers", 64)
    reply = httpx.post(
        f"http://{server.http_url}/v2/systemsharedmemory/region/raw/register",
        content=f'{{"key": "{key}", {body}}}',
    )
    assert reply.status_code == 400 and message in reply.json()["error"], reply.text


def test_cuda_shared_memory_is_refused_by_name(server) -> None:
    client = triton.InferenceServerClient(server.http_url)
    with pytest.raises(InferenceServerException) as info:
        client.register_cuda_shared_memory("gpu", b"handle", 0, 8)
    assert "CUDA is not available on this server (" in info.value.message()
    assert "system shared memory" in info.value.message()
    assert client.get_cuda_shared_memory_status() == []
    client.unregister_cuda_shared_memory()  # succeeds: perf_analyzer calls it at start and exit


@pytest.mark.parametrize("shared_memory", ["none", "system"])
def test_perf_analyzer_over_http(server: RunningServer, shared_memory: str) -> None:
    before = shm_objects()
    run = subprocess.run(
        [
            str(VENV / "perf_analyzer"),
            "-m",
            "ppocr-cls",
            "-i",
            "http",
            "-u",
            server.http_url,
            "--shape",
            "x:3,48,192",
            "--shared-memory",
            shared_memory,
            "--concurrency-range",
            "2:2",
            "-p",
            "1000",
            "--max-trials",
            "3",
            "--stability-percentage",
            "999",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Server:" in run.stdout and "Inference count: 0" not in run.stdout, run.stdout
    assert "Request count: 0" not in run.stdout
    assert shm_objects() <= before  # perf_analyzer's regions are gone again
    client = triton.InferenceServerClient(server.http_url)
    assert client.get_system_shared_memory_status() == []


def test_kserve_sdk_rest_client(server: RunningServer) -> None:
    assert KSERVE_PYTHON.exists(), "the KServe SDK venv is missing: run scripts/setup.sh"
    run = subprocess.run(
        [
            str(KSERVE_PYTHON),
            str(Path(__file__).with_name("kserve_rest.py")),
            f"http://{server.http_url}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    answer = json.loads(run.stdout.strip().splitlines()[-1])
    assert answer["id"] == "k1" and answer["name"] == OUTPUT and answer["shape"] == [1, 2]
    assert len(answer["data"]) == 2 and abs(sum(answer["data"]) - 1) < 1e-5
    assert "unknown model 'nope'" in answer["error"]
