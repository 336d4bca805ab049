"""ModelStreamInfer and system shared memory over gRPC against the real server
(subprocess), driven by the real client: tritonclient.grpc ``stream_infer`` (C26: good,
bad shape, unknown model, good on one stream), ids echoed, the final flag, the empty final
response on request; shared memory inputs and outputs through tritonclient's own shm
utility (C27 over the wire), regions unmapped in the server on unregister and at exit."""

from __future__ import annotations

import queue
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as triton
import tritonclient.utils.shared_memory as triton_shm
from tritonclient.utils import InferenceServerException

from ..conftest import RunningServer
from .helpers import infer_input, reference

OUT = "save_infer_model/scale_0.tmp_1"


class Stream:
    """A tritonclient.grpc stream whose callback results land in a queue."""

    def __init__(self, server: RunningServer) -> None:
        self.client = server.client()
        self.results: queue.Queue[tuple[object, object]] = queue.Queue()
        self.client.start_stream(callback=lambda result, error: self.results.put((result, error)))

    def next(self) -> tuple[triton.InferResult | None, InferenceServerException | None]:
        return self.results.get(timeout=30)  # type: ignore[return-value]

    def close(self) -> None:
        self.client.stop_stream()
        self.client.close()


@pytest.fixture
def stream(cls: RunningServer) -> Iterator[Stream]:
    opened = Stream(cls)
    yield opened
    opened.close()


def test_c26_a_bad_request_on_a_stream_gets_its_own_error_and_the_stream_goes_on(
    stream: Stream, ppocr_models: dict[str, Path]
) -> None:
    image = np.random.default_rng(3).random((1, 3, 48, 192), dtype=np.float32)
    bad = np.zeros((1, 3, 48, 100), np.float32)
    stream.client.async_stream_infer("ppocr-cls", [infer_input("x", image, "FP32")], request_id="a")
    stream.client.async_stream_infer("ppocr-cls", [infer_input("x", bad, "FP32")], request_id="b")
    stream.client.async_stream_infer("nope", [infer_input("x", image, "FP32")], request_id="c")
    stream.client.async_stream_infer("ppocr-cls", [infer_input("x", image, "FP32")], request_id="d")
    got = {}
    for _ in range(4):
        result, error = stream.next()
        if error is not None:
            got[error.message()] = error
        else:
            got[result.get_response().id] = result
    (want,) = reference(ppocr_models["ppocr-cls"], {"x": image})
    for request_id in ("a", "d"):
        response = got[request_id].get_response()
        assert response.model_version == "1"
        assert response.parameters["triton_final_response"].bool_param is True
        np.testing.assert_allclose(got[request_id].as_numpy(OUT), want, atol=1e-5)
    errors = sorted(message for message in got if message not in ("a", "d"))
    assert len(errors) == 2
    assert "input 'x'" in errors[0] and "[1, 3, 48, 100]" in errors[0]
    assert "unknown model 'nope'" in errors[1]


def test_stream_errors_carry_the_request_id(cls: RunningServer) -> None:
    """The raw stream: an error response holds ``error_message`` AND the request's id."""
    from tritonclient.grpc import service_pb2, service_pb2_grpc

    with cls.channel() as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        requests = [
            service_pb2.ModelInferRequest(model_name="nope", id="r-1"),
            service_pb2.ModelInferRequest(model_name="ppocr-cls", id="r-2"),
        ]
        responses = list(stub.ModelStreamInfer(iter(requests), timeout=30))
    by_id = {r.infer_response.id: r for r in responses}
    assert set(by_id) == {"r-1", "r-2"}
    assert "unknown model 'nope'" in by_id["r-1"].error_message
    assert "missing input 'x'" in by_id["r-2"].error_message
    assert by_id["r-2"].infer_response.model_name == "ppocr-cls"


def test_empty_final_response_only_when_asked_and_ordinary_models_answer_once(
    stream: Stream,
) -> None:
    x = infer_input("x", np.zeros((2, 3, 48, 192), np.float32), "FP32")
    stream.client.async_stream_infer(
        "ppocr-cls", [x], request_id="7", enable_empty_final_response=True
    )
    result, error = stream.next()
    assert error is None and result.get_response().id == "7"
    assert result.as_numpy(OUT).shape == (2, 2)
    assert result.get_response().parameters["triton_final_response"].bool_param
    with pytest.raises(queue.Empty):
        stream.results.get(timeout=1)  # one final response with outputs: no empty one after


@pytest.fixture
def shm_regions() -> Iterator[Callable[[str, int], tuple[str, object]]]:
    made = []

    def make(name: str, size: int) -> tuple[str, object]:
        key = f"/mmaas-test-{uuid.uuid4().hex[:12]}"
        handle = triton_shm.create_shared_memory_region(name, key, size)
        made.append(handle)
        return key, handle

    yield make
    for handle in made:
        triton_shm.destroy_shared_memory_region(handle)


def server_maps(server: RunningServer, key: str) -> int:
    with open(f"/proc/{server.process.pid}/maps") as lines:
        return sum(line.rstrip().endswith(f"/dev/shm{key}") for line in lines)


def test_shared_memory_inputs_and_outputs_equal_onnxruntime(
    cls: RunningServer, shm_regions, ppocr_models: dict[str, Path]
) -> None:
    client = cls.client()
    client.unregister_system_shared_memory()
    client.unregister_cuda_shared_memory()  # perf_analyzer calls both: both must be fine
    image = np.random.default_rng(5).random((2, 3, 48, 192), dtype=np.float32)
    in_key, in_handle = shm_regions("in", 4096 + image.nbytes)
    out_key, out_handle = shm_regions("out", 64)
    triton_shm.set_shared_memory_region(in_handle, [image], offset=4096 + 0)
    client.register_system_shared_memory("in", in_key, image.nbytes + 1024, offset=3072)
    client.register_system_shared_memory("out", out_key, 64)
    assert server_maps(cls, in_key) == 1
    x = triton.InferInput("x", list(image.shape), "FP32")
    x.set_shared_memory("in", image.nbytes, offset=1024)  # region offset 3072 + 1024 = 4096
    out = triton.InferRequestedOutput(OUT)
    out.set_shared_memory("out", 16, offset=8)
    result = client.infer("ppocr-cls", [x], outputs=[out])
    assert result.get_response().raw_output_contents == [b""]  # one entry per output
    got = triton_shm.get_contents_as_numpy(out_handle, np.float32, [2, 2], offset=8)
    (want,) = reference(ppocr_models["ppocr-cls"], {"x": image})
    np.testing.assert_allclose(got, want, atol=1e-5)
    status = client.get_system_shared_memory_status().regions
    assert (status["in"].key, status["in"].offset, status["in"].byte_size) == (
        in_key,
        3072,
        image.nbytes + 1024,
    )
    client.unregister_system_shared_memory("in")
    assert server_maps(cls, in_key) == 0 and server_maps(cls, out_key) == 1
    client.unregister_system_shared_memory()
    assert server_maps(cls, out_key) == 0


@pytest.mark.parametrize(
    ("register", "tensor", "status", "fragment"),
    [
        (
            (150000, 100000),
            None,
            "INVALID_ARGUMENT",
            "= 250000 bytes, but the shared memory object",
        ),
        (
            (0, 4096),
            (110592, 0),
            "INVALID_ARGUMENT",
            "shared_memory_byte_size 110592 = 110592 bytes passes its end",
        ),
        ((0, 200000), (100, 0), "INVALID_ARGUMENT", "holds 100 bytes, but shape [1, 3, 48, 192]"),
        ((0, 200000), (110592, 100000), "INVALID_ARGUMENT", "shared_memory_offset 100000 + "),
        (None, (110592, 0), "NOT_FOUND", "Unable to find shared memory region: 'r'"),
    ],
)
def test_c27_shared_memory_ranges_are_refused_over_grpc(
    cls: RunningServer, shm_regions, register, tensor, status, fragment
) -> None:
    client = cls.client()
    client.unregister_system_shared_memory()
    key, _ = shm_regions("r", 200000)
    if register is not None:
        offset, size = register
        try:
            client.register_system_shared_memory("r", key, size, offset=offset)
        except InferenceServerException as error:
            assert tensor is None and error.status() == f"StatusCode.{status}"
            assert fragment in error.message(), error.message()
            return
        assert tensor is not None, "the registration should have been refused"
    x = triton.InferInput("x", [1, 3, 48, 192], "FP32")
    x.set_shared_memory("r", tensor[0], offset=tensor[1])
    with pytest.raises(InferenceServerException) as error:
        client.infer("ppocr-cls", [x])
    assert error.value.status() == f"StatusCode.{status}"
    assert fragment in error.value.message(), error.value.message()
    client.unregister_system_shared_memory()


def test_a_name_twice_and_an_output_place_too_small_are_refused(
    cls: RunningServer, shm_regions
) -> None:
    client = cls.client()
    client.unregister_system_shared_memory()
    key, handle = shm_regions("o", 4096)
    client.register_system_shared_memory("o", key, 4096)
    with pytest.raises(InferenceServerException) as error:
        client.register_system_shared_memory("o", key, 16)
    assert error.value.status() == "StatusCode.ALREADY_EXISTS"
    x = infer_input("x", np.zeros((2, 3, 48, 192), np.float32), "FP32")
    out = triton.InferRequestedOutput(OUT)
    out.set_shared_memory("o", 8)
    before = triton_shm.get_contents_as_numpy(handle, np.uint8, [4096]).copy()
    with pytest.raises(InferenceServerException) as error:
        client.infer("ppocr-cls", [x], outputs=[out])
    assert error.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert "needs 16 bytes" in error.value.message() and "shared_memory_byte_size 8" in (
        error.value.message()
    )
    np.testing.assert_array_equal(
        triton_shm.get_contents_as_numpy(handle, np.uint8, [4096]), before
    )
    client.unregister_system_shared_memory()


def test_cuda_shared_memory_is_refused_clearly(cls: RunningServer) -> None:
    client = cls.client()
    with pytest.raises(InferenceServerException) as error:
        client.register_cuda_shared_memory("g", b"\0" * 64, 0, 64)
    assert error.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert "CUDA is not available on this server (" in error.value.message()
    assert not client.get_cuda_shared_memory_status().regions


def test_regions_are_released_at_shutdown(
    start_server: Callable[..., RunningServer], cls_dir: Path, shm_regions
) -> None:
    server = start_server(cls_dir, MMAAS_SHUTDOWN_GRACE_S="0")
    key, _ = shm_regions("s", 4096)
    server.client().register_system_shared_memory("s", key, 4096)
    assert server_maps(server, key) == 1
    assert server.stop() == 0
    assert "released 1 shared memory region" in server.stderr()
