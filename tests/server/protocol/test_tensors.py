"""The codec over a whole request and response (:mod:`mmaas.server.protocol.tensors`): each
input from its one source (values, raw bytes, a shared memory region read in place), a
repeated input refused, output wishes checked before anything runs, and outputs bound for
shared memory all written or none."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.utils.shared_memory as triton_shm

from mmaas.server.protocol.memory import MemoryLease, SharedMemory
from mmaas.server.protocol.shm import TensorRef
from mmaas.server.protocol.tensors import check_outputs, decode_inputs, encode_outputs
from mmaas.server.protocol.types import (
    InferInput,
    InferRequest,
    RawBytes,
    RequestedOutput,
    Values,
)
from mmaas.server.status import InvalidArgument, NotFound


@pytest.fixture
def registry() -> Iterator[tuple[MemoryLease, object]]:
    """A request's lease on a registry with region ``r``: 64 bytes of a fresh shm object,
    holding 0..15 as FP32."""
    key = f"/mmaas-test-{uuid.uuid4().hex[:12]}"
    handle = triton_shm.create_shared_memory_region("t", key, 64)
    triton_shm.set_shared_memory_region(handle, [np.arange(16, dtype=np.float32)])
    shm = SharedMemory()
    shm.register_system("r", key, 0, 64)
    with shm.lease() as lease:
        yield lease, handle
    shm.close()
    triton_shm.destroy_shared_memory_region(handle)


def test_each_input_comes_from_its_one_source(registry) -> None:
    shm, _ = registry
    request = InferRequest(
        id="1",
        inputs=[
            InferInput("a", "INT32", (2,), Values([1, 2])),
            InferInput("b", "FP32", (2,), RawBytes(np.array([3, 4], np.float32).tobytes())),
            InferInput("c", "FP32", (2, 2), TensorRef("r", 8, 16)),
        ],
    )
    arrays = decode_inputs(request, shm)
    assert arrays["a"].tolist() == [1, 2] and arrays["a"].dtype == np.int32
    assert arrays["b"].tolist() == [3.0, 4.0]
    assert arrays["c"].tolist() == [[2.0, 3.0], [4.0, 5.0]]  # read in place at offset 8


def test_a_repeated_input_and_a_short_region_are_refused(registry) -> None:
    shm, _ = registry
    twice = InferInput("a", "INT32", (1,), Values([1]))
    with pytest.raises(InvalidArgument, match="input 'a' appears twice in inputs"):
        decode_inputs(InferRequest("", [twice, twice]), shm)
    short = InferInput("c", "FP32", (2, 2), TensorRef("r", 0, 8))
    with pytest.raises(InvalidArgument) as info:
        decode_inputs(InferRequest("", [short]), shm)
    assert info.value.message == (
        "input 'c': the data in shared memory region 'r' holds 8 bytes, but shape [2, 2] of "
        "FP32 (4 bytes each) needs 16"
    )
    unknown = InferInput("c", "FP32", (1,), TensorRef("nope", 0, 4))
    with pytest.raises(NotFound, match="input 'c': Unable to find shared memory region: 'nope'"):
        decode_inputs(InferRequest("", [unknown]), shm)


def test_output_wishes_are_checked_before_anything_runs(registry) -> None:
    shm, _ = registry
    classify = RequestedOutput("y", {"classification": 2})
    with pytest.raises(InvalidArgument, match="output 'y': parameter 'classification'"):
        check_outputs(InferRequest("", [], [classify]), shm)
    past = RequestedOutput("y", ref=TensorRef("r", 60, 8))
    with pytest.raises(InvalidArgument, match="passes its end"):
        check_outputs(InferRequest("", [], [past]), shm)
    placed = RequestedOutput("y", ref=TensorRef("r", 0, 8))
    assert check_outputs(InferRequest("", [], [placed, RequestedOutput("z")]), shm) == {
        "y": TensorRef("r", 0, 8)
    }


def test_outputs_for_shared_memory_are_all_written_or_none(registry) -> None:
    shm, handle = registry
    results = {
        "y": np.array([7, 8], np.float32),
        "z": np.array([b"ab"], object),
        "w": np.array([[True]]),
    }
    refs = {"y": TensorRef("r", 0, 8), "z": TensorRef("r", 8, 4)}  # z needs 6 bytes
    before = triton_shm.get_contents_as_numpy(handle, np.uint8, [64]).copy()
    with pytest.raises(InvalidArgument, match=r"output 'z'.*the output needs 6 bytes"):
        encode_outputs(results, refs, shm)
    np.testing.assert_array_equal(triton_shm.get_contents_as_numpy(handle, np.uint8, [64]), before)
    refs["z"] = TensorRef("r", 8, 6)
    outputs = encode_outputs(results, refs, shm)
    assert [(o.name, o.datatype, o.shape, o.data is None) for o in outputs] == [
        ("y", "FP32", (2,), True),
        ("z", "BYTES", (1,), True),
        ("w", "BOOL", (1, 1), False),
    ]
    assert triton_shm.get_contents_as_numpy(handle, np.float32, [2]).tolist() == [7.0, 8.0]
    assert bytes(triton_shm.get_contents_as_numpy(handle, np.uint8, [14])[8:]) == b"\2\0\0\0ab"
