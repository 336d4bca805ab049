"""The CUDA runtime calls mmaas makes itself, through ctypes on ``libcudart`` (no
cuda-python, torch or CuPy in an image): the device count, CUDA IPC memory handles
(Triton's CUDA shared memory extension), and copies between host and device memory on a
stream of the caller's own; and :class:`DeviceArray`, a tensor that lies in device memory.

The library is the CUDA runtime already on the loader path: ``libcudart.so.13`` (the GPU
image's ``nvidia-cuda-runtime`` wheel, on its ``LD_LIBRARY_PATH``; the one onnxruntime-gpu
loads), else ``libcudart.so.12``, else ``libcudart.so``. Every runtime shares the device's
primary context, so a pointer from one (ONNX Runtime's allocations) is valid in another.
Every call's status is checked: a failure raises :class:`CudaError` with
``cudaGetErrorName`` and ``cudaGetErrorString``. :func:`unavailable` says why CUDA cannot
be used here (no library, no device), or None.

Copies (:class:`Copier`) are ``cudaMemcpyAsync`` on a non-blocking stream, then
``cudaStreamSynchronize``: they never wait for other streams' work (another instance's
kernels) and are complete when the call returns. ``cudaMemcpyDefault`` lets the runtime
tell host from device pointers (unified addressing, every 64-bit CUDA platform).
"""

from __future__ import annotations

import ctypes
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from mmaas.core.errors import MmaasError

LIBRARIES = ("libcudart.so.13", "libcudart.so.12", "libcudart.so")
IPC_HANDLE_BYTES = 64  # sizeof(cudaIpcMemHandle_t)
COPY_DEFAULT = 4  # cudaMemcpyDefault
LAZY_PEER_ACCESS = 1  # cudaIpcMemLazyEnablePeerAccess
NON_BLOCKING = 1  # cudaStreamNonBlocking


class CudaError(MmaasError):
    """A CUDA runtime call failed, or no CUDA runtime or device exists here."""


class IpcHandle(ctypes.Structure):
    """``cudaIpcMemHandle_t``, passed by value. Its bytes go in with ``from_buffer_copy``
    (:func:`ipc_handle`): a ``c_char`` array would stop at the first zero byte."""

    _fields_ = [("reserved", ctypes.c_ubyte * IPC_HANDLE_BYTES)]


def ipc_handle(raw: bytes) -> IpcHandle:
    """The handle of ``raw`` (:data:`IPC_HANDLE_BYTES` bytes, zeros included).

    Raises:
        ValueError: another length.
    """
    return IpcHandle.from_buffer_copy(raw)


class Cuda:
    """The runtime calls over one loaded ``libcudart`` (see the module doc)."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self.lib = library
        library.cudaGetErrorString.restype = ctypes.c_char_p
        library.cudaGetErrorName.restype = ctypes.c_char_p
        library.cudaIpcOpenMemHandle.argtypes = [
            ctypes.POINTER(ctypes.c_void_p),
            IpcHandle,
            ctypes.c_uint,
        ]
        library.cudaMemcpyAsync.argtypes = [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_int,
            ctypes.c_void_p,
        ]

    def check(self, status: int, call: str) -> None:
        """Raise :class:`CudaError` naming ``call`` unless ``status`` is cudaSuccess."""
        if status != 0:
            name = self.lib.cudaGetErrorName(status).decode()
            text = self.lib.cudaGetErrorString(status).decode()
            raise CudaError(f"{call} failed: {name} ({text})")

    def device_count(self) -> int:
        """The devices ``CUDA_VISIBLE_DEVICES`` leaves visible."""
        count = ctypes.c_int(0)
        self.check(self.lib.cudaGetDeviceCount(ctypes.byref(count)), "cudaGetDeviceCount")
        return count.value

    def set_device(self, device: int) -> None:
        """Make ``device`` the calling thread's current device."""
        self.check(self.lib.cudaSetDevice(device), f"cudaSetDevice({device})")

    def ipc_open(self, handle: bytes, device: int) -> int:
        """Map another process's allocation from its IPC ``handle`` (the
        :data:`IPC_HANDLE_BYTES` of a ``cudaIpcMemHandle_t``) on ``device``; the device
        pointer (close it with :meth:`ipc_close`)."""
        self.set_device(device)
        pointer = ctypes.c_void_p()
        status = self.lib.cudaIpcOpenMemHandle(
            ctypes.byref(pointer), ipc_handle(handle), LAZY_PEER_ACCESS
        )
        self.check(status, "cudaIpcOpenMemHandle")
        return int(pointer.value or 0)

    def ipc_close(self, pointer: int) -> None:
        """Unmap a pointer :meth:`ipc_open` returned."""
        self.check(
            self.lib.cudaIpcCloseMemHandle(ctypes.c_void_p(pointer)), "cudaIpcCloseMemHandle"
        )

    def create_stream(self) -> int:
        """A new non-blocking stream (it never waits for the legacy default stream)."""
        stream = ctypes.c_void_p()
        status = self.lib.cudaStreamCreateWithFlags(ctypes.byref(stream), NON_BLOCKING)
        self.check(status, "cudaStreamCreateWithFlags")
        return int(stream.value or 0)

    def copy(self, destination: int, source: int, size: int, stream: int) -> None:
        """Copy ``size`` bytes (host or device pointers) on ``stream``; complete on return."""
        status = self.lib.cudaMemcpyAsync(destination, source, size, COPY_DEFAULT, stream)
        self.check(status, "cudaMemcpyAsync")
        self.check(self.lib.cudaStreamSynchronize(ctypes.c_void_p(stream)), "cudaStreamSynchronize")


@functools.cache
def runtime() -> Cuda:
    """The CUDA runtime of this process (loaded once).

    Raises:
        CudaError: no ``libcudart`` on the loader path, or it reports no device.
    """
    errors = []
    for name in LIBRARIES:
        try:
            cuda = Cuda(ctypes.CDLL(name))
            break
        except OSError as exc:
            errors.append(str(exc))
    else:
        raise CudaError(f"no CUDA runtime library here ({'; '.join(errors)})")
    if cuda.device_count() < 1:
        raise CudaError("the CUDA runtime sees no device")
    return cuda


def unavailable() -> str | None:
    """Why CUDA cannot be used in this process (the runtime's own words), or None."""
    try:
        runtime()
    except CudaError as exc:  # not cached: a later call looks again
        return exc.message
    return None


class Copier(Protocol):
    """What moves bytes between host and device memory for one user (an engine instance,
    the request path): :class:`StreamCopier` on CUDA."""

    def copy(self, destination: int, source: int, size: int) -> None:
        """Copy ``size`` bytes from ``source`` to ``destination`` (host or device
        addresses); complete when it returns."""
        ...


class StreamCopier:
    """Copies on a stream of its own (:meth:`Cuda.copy`), made on first use."""

    def __init__(self) -> None:
        self.stream: int | None = None

    def copy(self, destination: int, source: int, size: int) -> None:
        """See :class:`Copier`."""
        if size == 0:
            return
        cuda = runtime()
        if self.stream is None:
            self.stream = cuda.create_stream()
        cuda.copy(destination, source, size, self.stream)


@functools.cache
def default_copier() -> Copier:
    """The copier of the request path (one stream for the process's event loop thread)."""
    return StreamCopier()


@dataclass(frozen=True, eq=False)
class DeviceArray:
    """A C-contiguous tensor in device memory: ``pointer`` (bytes address on ``device``),
    ``shape``, numpy ``dtype``; ``owner`` keeps the memory alive as long as this array
    (an ONNX Runtime OrtValue, a shared memory region's lease). ``np.asarray`` copies it
    to the host (:meth:`to_host`), so code written for numpy arrays still works on it."""

    pointer: int
    shape: tuple[int, ...]
    dtype: np.dtype
    device: int = 0
    owner: Any = None

    @property
    def nbytes(self) -> int:
        """Its size in bytes."""
        return int(math.prod(self.shape)) * self.dtype.itemsize

    @property
    def ndim(self) -> int:
        """Its number of axes."""
        return len(self.shape)

    def rows(self, start: int, stop: int) -> DeviceArray:
        """Rows ``[start, stop)`` of axis 0, without a copy (the same owner)."""
        row = self.nbytes // self.shape[0] if self.shape and self.shape[0] else 0
        return DeviceArray(
            self.pointer + start * row,
            (stop - start, *self.shape[1:]),
            self.dtype,
            self.device,
            self.owner,
        )

    def to_host(self, copier: Copier | None = None) -> np.ndarray:
        """A new host array holding its values."""
        out = np.empty(self.shape, self.dtype)
        (copier or default_copier()).copy(out.ctypes.data, self.pointer, self.nbytes)
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        host = self.to_host()
        return host if dtype is None else host.astype(dtype)


def on_host(arrays: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """``arrays`` with every :class:`DeviceArray` copied to the host (the others as they
    are), for code that reads host memory only."""
    return {
        name: value.to_host() if isinstance(value, DeviceArray) else value
        for name, value in arrays.items()
    }
