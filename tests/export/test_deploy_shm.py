"""System shared memory with the image, on a real Docker engine and tritonclient.http: a
container in its own IPC namespace cannot see the client's object (the refusal says
``--ipc=host``), the image's user 10001 may not open an object the client made mode 0600
(the refusal says ``--user``), and with both the region registers and serves a request."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.http as triton
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from docker_fixtures import run_container, wait_for_grpc_serving

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SHAPE = (1, 3, 32, 32)  # ppocr-det's smallest input
OUT_BYTES = 4 * 32 * 32


@pytest.fixture
def objects() -> Iterator[tuple[str, object, str, object]]:
    """An input and an output object, made by tritonclient as root with its mode 0600."""
    tag = f"/mmaas-test-{uuid.uuid4().hex[:8]}"
    made = (
        f"{tag}-in",
        shm.create_shared_memory_region("in", f"{tag}-in", 4 * int(np.prod(SHAPE))),
        f"{tag}-out",
        shm.create_shared_memory_region("out", f"{tag}-out", OUT_BYTES),
    )
    yield made
    shm.destroy_shared_memory_region(made[1])
    shm.destroy_shared_memory_region(made[3])


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        (
            (),
            "the server must share the client's IPC namespace to see it: run the image "
            "with `docker run --ipc=host`",
        ),
        (
            ("--ipc=host",),
            "permission denied: the server (uid 10001) may not read and write "
            "the client's object; run the server as the client's user (`docker run --user UID`)",
        ),
        (("--ipc=host", "--user", "0"), None),
    ],
    ids=["own-ipc", "other-user", "both"],
)
def test_shared_memory_needs_the_clients_ipc_namespace_and_user(
    signed, docker_cli, objects, options, fragment
) -> None:
    _, image = signed
    in_key, in_handle, out_key, out_handle = objects
    with run_container(docker_cli, image, ports=[8000, 8001], options=options) as container:
        wait_for_grpc_serving(container.ports[8001], timeout=120, container=container)
        client = triton.InferenceServerClient(f"127.0.0.1:{container.ports[8000]}")
        if fragment is not None:
            with pytest.raises(InferenceServerException) as info:
                client.register_system_shared_memory("in", in_key, 4 * int(np.prod(SHAPE)))
            assert str(info.value.status()) == "400" and fragment in info.value.message()
            return
        image_data = np.random.default_rng(2).random(SHAPE, dtype=np.float32)
        shm.set_shared_memory_region(in_handle, [image_data])
        client.register_system_shared_memory("in", in_key, image_data.nbytes)
        client.register_system_shared_memory("out", out_key, OUT_BYTES)
        tensor = triton.InferInput("x", list(SHAPE), "FP32")
        tensor.set_shared_memory("in", image_data.nbytes)
        output = triton.InferRequestedOutput("sigmoid_0.tmp_0", binary_data=False)
        output.set_shared_memory("out", OUT_BYTES)
        client.infer("ppocr-det", [tensor], outputs=[output])
        probabilities = shm.get_contents_as_numpy(out_handle, np.float32, [1, 1, 32, 32])
        assert probabilities.min() >= 0 and probabilities.max() <= 1
        client.unregister_system_shared_memory()
