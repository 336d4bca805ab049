"""Unregistering system shared memory never fails a request in flight (Triton's rule):
32 requests of the real PP-OCRv4 detector, each reading its input from and writing its
output to regions of its own, are in flight when their regions are unregistered (one by
one, or all at once); every one is answered with the right output, the status lists the
regions as pending until then, a new request naming one gets NOT_FOUND, and the server
unmaps them all once the requests end. Real client: tritonclient.grpc's async_infer and
tritonclient's shm utilities; the status is read over HTTP too."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from .conftest import RunningServer

REQUESTS = 32
SHAPE = (1, 3, 320, 320)
OUTPUT = "sigmoid_0.tmp_0"


@pytest.fixture(scope="module")
def server(module_server: Callable[..., RunningServer], det_dir: Path) -> RunningServer:
    return module_server(det_dir)


@pytest.fixture
def objects() -> Iterator[list[tuple[str, object, str, object]]]:
    """32 pairs of shm objects (input key, handle, output key, handle), then destroyed."""
    made = []
    for index in range(REQUESTS):
        tag = f"/mmaas-test-{uuid.uuid4().hex[:8]}-{index}"
        made.append(
            (
                f"{tag}-in",
                shm.create_shared_memory_region(f"in{index}", f"{tag}-in", 4 * np.prod(SHAPE)),
                f"{tag}-out",
                shm.create_shared_memory_region(f"out{index}", f"{tag}-out", 4 * 320 * 320),
            )
        )
    yield made
    for _, in_handle, _, out_handle in made:
        shm.destroy_shared_memory_region(in_handle)
        shm.destroy_shared_memory_region(out_handle)


def server_maps(server: RunningServer, keys: list[str]) -> int:
    """How many mappings of the objects ``keys`` the server process holds."""
    text = Path(f"/proc/{server.process.pid}/maps").read_text()
    return sum(
        line.rstrip().endswith(tuple(f"/dev/shm{key}" for key in keys))
        for line in text.splitlines()
    )


@pytest.mark.parametrize("how", ["one-by-one", "all"])
def test_unregistering_regions_in_use_fails_no_request(
    server: RunningServer, objects, ppocr_models: dict[str, Path], how: str
) -> None:
    rng = np.random.default_rng(11)
    images = [rng.random(SHAPE, dtype=np.float32) for _ in range(REQUESTS)]
    client = triton_grpc.InferenceServerClient(server.url)
    keys = [key for in_key, _, out_key, _ in objects for key in (in_key, out_key)]
    for index, (in_key, in_handle, out_key, _) in enumerate(objects):
        shm.set_shared_memory_region(in_handle, [images[index]])
        client.register_system_shared_memory(f"in{index}", in_key, images[index].nbytes)
        client.register_system_shared_memory(f"out{index}", out_key, 4 * 320 * 320)
    answers: dict[int, object] = {}
    done = threading.Event()

    def callback(index: int, result, error) -> None:
        answers[index] = error if error is not None else result
        if len(answers) == REQUESTS:
            done.set()

    for index in range(REQUESTS):
        tensor = triton_grpc.InferInput("x", list(SHAPE), "FP32")
        tensor.set_shared_memory(f"in{index}", images[index].nbytes)
        output = triton_grpc.InferRequestedOutput(OUTPUT)
        output.set_shared_memory(f"out{index}", 4 * 320 * 320)
        client.async_infer(
            "ppocr-det",
            [tensor],
            lambda result, error, index=index: callback(index, result, error),
            outputs=[output],
        )
    if how == "all":
        client.unregister_system_shared_memory()
    else:
        for index in range(REQUESTS):
            client.unregister_system_shared_memory(f"in{index}")
            client.unregister_system_shared_memory(f"out{index}")
    status = triton_http.InferenceServerClient(server.http_url).get_system_shared_memory_status()
    assert status and all(region["pending"] for region in status), status
    late = triton_grpc.InferInput("x", list(SHAPE), "FP32")
    late.set_shared_memory("in0", images[0].nbytes)
    with pytest.raises(InferenceServerException, match="Unable to find shared memory region"):
        client.infer("ppocr-det", [late])
    assert done.wait(120), f"{len(answers)} of {REQUESTS} answered"
    failed = {i: a for i, a in answers.items() if isinstance(a, InferenceServerException)}
    assert not failed, failed
    session = ort.InferenceSession(str(ppocr_models["ppocr-det"]))
    for index in (0, REQUESTS // 2, REQUESTS - 1):
        expected = session.run(None, {"x": images[index]})[0]
        got = shm.get_contents_as_numpy(objects[index][3], np.float32, list(expected.shape))
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    assert client.get_system_shared_memory_status().regions == {}
    assert server_maps(server, keys) == 0
