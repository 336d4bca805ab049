"""CUDA shared memory (:mod:`mmaas.server.protocol.cuda_shm`, :mod:`.memory`): the refusal
where CUDA cannot be used (this machine, for real), and on the host-memory stand-in of the
CUDA runtime (tests/host_cuda.py): registration by IPC handle, status, inputs handed on as
device arrays without a copy, outputs copied into the region from the host or the device,
one set of names over both kinds, ranges checked, and a region unregistered while a
request still reads it listed as pending and unmapped only when that request is done (the
in-flight rule of :mod:`mmaas.server.protocol.regions`, shared with system regions). The
real IPC calls run on the H200 (tests/backends/onnxruntime/runtime/test_gpu_serving.py,
tritonclient's cuda_shared_memory and perf_analyzer --shared-memory cuda)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from host_cuda import HostCuda
from mmaas.core import cuda
from mmaas.server.protocol.cuda_shm import CudaRegionStatus
from mmaas.server.protocol.memory import SharedMemory
from mmaas.server.protocol.shm import TensorRef
from mmaas.server.protocol.tensors import decode_inputs, encode_outputs
from mmaas.server.protocol.types import InferInput, InferRequest
from mmaas.server.status import AlreadyExists, InvalidArgument, NotFound


@pytest.mark.skipif(cuda.unavailable() is None, reason="CUDA is usable here")
def test_registration_is_refused_naming_why_where_cuda_cannot_be_used() -> None:
    shm = SharedMemory()
    with pytest.raises(InvalidArgument) as info:
        shm.register_cuda("gpu_in", b"\0" * 64, 0, 8)
    message = info.value.message
    why = cuda.unavailable()  # this machine's: no library, no driver or no device
    assert message.startswith(
        f"failed to register CUDA shared memory region 'gpu_in': CUDA is not available on "
        f"this server ({why}); "
    )
    assert "cudaGetDeviceCount failed" in why or "no CUDA runtime library" in why
    assert message.endswith("use system shared memory (SystemSharedMemoryRegister, "
                            "/v2/systemsharedmemory)")  # fmt: skip
    assert shm.cuda.status() == []
    shm.cuda.unregister()  # perf_analyzer's clean-up call succeeds
    shm.cuda.unregister("gpu_in")


def image_request(ref: TensorRef, shape: tuple[int, ...] = (2, 3)) -> InferRequest:
    return InferRequest("r", [InferInput("x", "FP32", shape, ref)])


def test_an_input_in_a_cuda_region_is_handed_on_in_place(host_cuda: HostCuda) -> None:
    handle, memory = host_cuda.allocate(64)
    memory[8:32] = np.arange(6, dtype=np.float32).view(np.uint8)
    shm = SharedMemory()
    shm.register_cuda("in", handle, 0, 64)
    assert [(s.name, s.device_id, s.byte_size) for s in shm.cuda.status()] == [("in", 0, 64)]
    with shm.lease() as lease:
        (x,) = decode_inputs(image_request(TensorRef("in", 8, 24)), lease).values()
    assert isinstance(x, cuda.DeviceArray) and host_cuda.copies == 0
    assert (x.pointer, x.shape, x.dtype) == (memory.ctypes.data + 8, (2, 3), np.float32)
    np.testing.assert_array_equal(np.asarray(x), np.arange(6, dtype=np.float32).reshape(2, 3))
    with pytest.raises(InvalidArgument) as info:
        decode_inputs(image_request(TensorRef("in", 8, 20)), shm.lease())
    assert info.value.message == (
        "input 'x': the data in shared memory region 'in' holds 20 bytes, but shape [2, 3] "
        "of FP32 (4 bytes each) needs 24"
    )
    with pytest.raises(InvalidArgument, match="passes its end"):
        decode_inputs(image_request(TensorRef("in", 48, 24)), shm.lease())
    with pytest.raises(NotFound, match="register it first"):
        decode_inputs(image_request(TensorRef("nope", 0, 24)), shm.lease())


def test_outputs_are_copied_into_cuda_regions_from_host_or_device(host_cuda: HostCuda) -> None:
    handle, memory = host_cuda.allocate(64)
    shm = SharedMemory()
    shm.register_cuda("out", handle, 0, 64)
    host = np.arange(4, dtype=np.float32)
    source = np.arange(10, 14, dtype=np.float32)
    device = cuda.DeviceArray(source.ctypes.data, (4,), np.dtype(np.float32), 0, source)
    refs = {"a": TensorRef("out", 0, 16), "b": TensorRef("out", 16, 16)}
    with shm.lease() as lease:
        tensors = encode_outputs({"a": host, "b": device, "c": device}, refs, lease)
    np.testing.assert_array_equal(memory[:32].view(np.float32), np.r_[host, source])
    assert [(t.name, t.shape, t.data is None) for t in tensors] == [
        ("a", (4,), True), ("b", (4,), True), ("c", (4,), False)]  # fmt: skip
    np.testing.assert_array_equal(tensors[2].data, source)  # to the host, for the response
    small = {"a": TensorRef("out", 32, 16), "b": TensorRef("out", 48, 8)}
    before = memory.copy()
    with pytest.raises(InvalidArgument, match="needs 16 bytes"):
        encode_outputs({"a": host, "b": device}, small, shm.lease())
    np.testing.assert_array_equal(memory, before)  # checked before the first is written


def test_one_set_of_names_over_system_and_cuda_regions(host_cuda: HostCuda, tmp_path) -> None:
    handle, _ = host_cuda.allocate(16)
    (tmp_path / "obj").write_bytes(bytes(16))
    from mmaas.server.protocol.shm import SystemSharedMemory

    shm = SharedMemory(SystemSharedMemory(tmp_path))
    shm.register_cuda("r", handle, 0, 16)
    with pytest.raises(AlreadyExists, match="a CUDA shared memory region"):
        shm.register_system("r", "/obj", 0, 16)
    shm.register_system("s", "/obj", 0, 16)
    with pytest.raises(AlreadyExists, match="a system shared memory region"):
        shm.register_cuda("s", handle, 0, 16)
    with pytest.raises(AlreadyExists):
        shm.register_cuda("r", handle, 0, 16)
    with pytest.raises(NotFound, match="Unable to find cuda shared memory region: 's'"):
        shm.cuda.status("s")
    shm.system.unregister()  # system regions only
    assert [s.name for s in shm.cuda.status()] == ["r"]
    assert shm.close() == 1 and host_cuda.closed == host_cuda.opened


def test_a_region_read_by_an_in_flight_request_is_unmapped_when_it_is_done(
    host_cuda: HostCuda,
) -> None:
    handle, _ = host_cuda.allocate(24)
    shm = SharedMemory()
    shm.register_cuda("in", handle, 0, 24)
    with shm.lease() as lease:  # the request: its region pinned while it runs
        arrays = decode_inputs(image_request(TensorRef("in", 0, 24)), lease)
        shm.cuda.unregister("in")
        assert shm.cuda.status() == [CudaRegionStatus("in", 0, 24, pending=True)]
    assert shm.cuda.status() == [CudaRegionStatus("in", 0, 24, pending=True)]  # its arrays
    assert host_cuda.closed == []  # the name is free, the map kept while the request reads
    with pytest.raises(NotFound):
        decode_inputs(image_request(TensorRef("in", 0, 24)), shm.lease())  # a new one: gone
    shm.register_cuda("in", handle, 0, 24)  # registered again meanwhile
    del arrays
    gc.collect()
    assert host_cuda.closed == host_cuda.opened[:1]
    assert shm.cuda.status() == [CudaRegionStatus("in", 0, 24)]
    shm.cuda.unregister()
    assert host_cuda.closed == host_cuda.opened


def test_bad_registrations_are_refused_naming_the_fault(host_cuda: HostCuda) -> None:
    shm = SharedMemory()
    with pytest.raises(InvalidArgument) as info:
        shm.register_cuda("h", b"short", 0, 8)
    assert info.value.message == (
        "failed to register CUDA shared memory region 'h': raw_handle holds 5 bytes, but a "
        "CUDA IPC memory handle (cudaIpcMemHandle_t) is 64; send the handle "
        "cudaIpcGetMemHandle gave for memory allocated with cudaMalloc on device 0"
    )
    with pytest.raises(InvalidArgument, match="cudaErrorInvalidValue"):
        shm.register_cuda("h", b"x" * 64, 0, 8)
    with pytest.raises(InvalidArgument, match="byte_size 0 > 0"):
        shm.register_cuda("h", b"x" * 64, 0, 0)
    with pytest.raises(InvalidArgument, match="needs a name"):
        shm.register_cuda("", b"x" * 64, 0, 8)
    assert shm.cuda.status() == []
