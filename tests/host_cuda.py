"""A stand-in for the CUDA runtime (:class:`mmaas.core.cuda.Cuda`) over host memory, for
tests on machines without a GPU (CUDA cannot exist here): "device" pointers are host
addresses, copies are ``memmove``, and an IPC handle names a host buffer the test
allocated. Everything above the runtime calls (the CUDA shared memory registry, the
request path, the GPU engine's copies) runs for real on it; the real calls run in the
``gpu`` tests on the H200 (tests/backends/onnxruntime/runtime/test_gpu.py)."""

from __future__ import annotations

import ctypes
import itertools

import numpy as np
import pytest

from mmaas.core import cuda


class HostCuda:
    """The runtime calls mmaas makes, over host memory (module doc)."""

    def __init__(self) -> None:
        self.buffers: dict[bytes, np.ndarray] = {}
        self.opened: list[int] = []
        self.closed: list[int] = []
        self.copies = 0
        self._serial = itertools.count(1)

    def allocate(self, size: int) -> tuple[bytes, np.ndarray]:
        """A "device" buffer of ``size`` bytes and its 64-byte IPC handle."""
        handle = next(self._serial).to_bytes(8, "little") * 8
        self.buffers[handle] = np.zeros(size, np.uint8)
        return handle, self.buffers[handle]

    def device_count(self) -> int:
        return 1

    def set_device(self, device: int) -> None:
        assert device == 0

    def ipc_open(self, handle: bytes, device: int) -> int:
        if handle not in self.buffers:
            raise cuda.CudaError(
                "cudaIpcOpenMemHandle failed: cudaErrorInvalidValue (invalid argument)"
            )
        pointer = int(self.buffers[handle].ctypes.data)
        self.opened.append(pointer)
        return pointer

    def ipc_close(self, pointer: int) -> None:
        self.closed.append(pointer)

    def create_stream(self) -> int:
        return 0

    def copy(self, destination: int, source: int, size: int, stream: int) -> None:
        self.copies += 1
        ctypes.memmove(destination, source, size)


@pytest.fixture
def host_cuda(monkeypatch: pytest.MonkeyPatch) -> HostCuda:
    """The stand-in installed as this process's CUDA runtime for one test."""
    fake = HostCuda()
    monkeypatch.setattr(cuda, "runtime", lambda: fake)
    return fake
