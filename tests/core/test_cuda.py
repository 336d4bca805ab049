"""The CUDA runtime calls' host side (:mod:`mmaas.core.cuda`): the IPC handle reaches
``cudaIpcOpenMemHandle`` with every byte (zeros included: a ``c_char`` array stopped at the
first one, and the H200 answered ``cudaErrorInvalidValue``), device arrays view rows
without a copy and come back to the host through the copier, and a host without CUDA says
why. The calls themselves run on the H200 (tests/backends/onnxruntime/runtime/
test_gpu_serving.py)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from host_cuda import HostCuda
from mmaas.core import cuda


def test_an_ipc_handle_keeps_every_byte_zeros_included() -> None:
    raw = bytes([0x70, 0xB6, 0, 0, 0, 0, 0, 0, 0x98, 0x0B] + [0] * 50 + [1, 2, 3, 4])
    handle = cuda.ipc_handle(raw)
    assert ctypes.sizeof(handle) == cuda.IPC_HANDLE_BYTES and bytes(handle) == raw
    with pytest.raises(ValueError):
        cuda.ipc_handle(raw[:10])


def test_device_arrays_view_rows_and_come_back_to_the_host(host_cuda: HostCuda) -> None:
    values = np.arange(24, dtype=np.float32).reshape(6, 4)
    array = cuda.DeviceArray(values.ctypes.data, (6, 4), np.dtype(np.float32), 0, values)
    rows = array.rows(2, 5)
    assert (rows.shape, rows.nbytes, rows.pointer) == ((3, 4), 48, values.ctypes.data + 32)
    np.testing.assert_array_equal(np.asarray(rows), values[2:5])
    assert host_cuda.copies == 1
    host = cuda.on_host({"x": array, "y": values})
    assert isinstance(host["x"], np.ndarray) and host["y"] is values


@pytest.mark.skipif(cuda.unavailable() is None, reason="CUDA is usable here")
def test_without_cuda_the_runtime_says_why() -> None:
    why = cuda.unavailable()
    assert why and ("no CUDA runtime library" in why or "cudaGetDeviceCount failed" in why)
    with pytest.raises(cuda.CudaError):
        cuda.runtime()
