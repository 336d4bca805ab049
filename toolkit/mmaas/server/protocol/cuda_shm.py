"""CUDA shared memory: Triton's shared-memory extension (CUDA part), protocol-neutral.

A client allocates device memory (``cudaMalloc``), takes its CUDA IPC handle
(``cudaIpcGetMemHandle``: 64 bytes, e.g. ``tritonclient.utils.cuda_shared_memory``) and
registers it under a name with its ``device_id`` and ``byte_size``; requests then name the
region in a tensor's parameters exactly as a system region (``shared_memory_region``,
``shared_memory_offset``, ``shared_memory_byte_size``: :func:`~.shm.tensor_ref`). The
server maps the allocation (``cudaIpcOpenMemHandle``, :mod:`mmaas.core.cuda`); an input is
handed to the engine as a :class:`~mmaas.core.cuda.DeviceArray` over the region (a GPU
engine binds it in place, any other copies it to the host), an output is copied into the
region on the device (or from the host for an engine that answers in host memory).

Regions are held by the requests that read them: unregistering a region that an
in-flight request still reads takes its name away at once (status no longer lists it, the
name can be registered again) and unmaps the memory when the last such request finishes.

On a host where CUDA cannot be used (no CUDA runtime library, no visible device) a
registration is refused with INVALID_ARGUMENT naming why and the alternative (Triton
without GPU support refuses it too); status answers an empty list and unregister
succeeds, as perf_analyzer's clean-up calls need. Messages follow Triton's
(``src/shared_memory_manager.cc``) and also name the sizes at fault.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from mmaas.core import cuda
from mmaas.server.protocol.shm import TensorRef
from mmaas.server.status import AlreadyExists, InvalidArgument, NotFound

SYSTEM_INSTEAD = "use system shared memory (SystemSharedMemoryRegister, /v2/systemsharedmemory)"


@dataclass(frozen=True)
class CudaRegionStatus:
    """A registered region as the status calls report it (Triton's
    ``CudaSharedMemoryStatusResponse.RegionStatus``): its device and size in bytes."""

    name: str
    device_id: int
    byte_size: int


class _Region:
    """One mapped allocation and the requests that still read it."""

    def __init__(self, status: CudaRegionStatus, pointer: int) -> None:
        self.status = status
        self.pointer = pointer
        self.readers = 0
        self.released = False  # unregistered: unmap when the last reader is done
        self.lock = threading.Lock()

    def lease(self) -> _Lease:
        """Count one more reader until the returned lease is dropped."""
        with self.lock:
            self.readers += 1
        return _Lease(self)

    def release(self) -> None:
        """Unregistered: unmap now, or when the last reader finishes."""
        with self.lock:
            self.released = True
            idle = self.readers == 0
        if idle:
            self._unmap()

    def done_reading(self) -> None:
        """One reader finished (its lease was dropped)."""
        with self.lock:
            self.readers -= 1
            idle = self.released and self.readers == 0
        if idle:
            self._unmap()

    def _unmap(self) -> None:
        pointer, self.pointer = self.pointer, 0
        if pointer:
            cuda.runtime().ipc_close(pointer)


class _Lease:
    """Held by the arrays over a region (their ``owner``); dropping the last one ends the
    read."""

    def __init__(self, region: _Region) -> None:
        self.region = region

    def __del__(self) -> None:
        self.region.done_reading()


class CudaSharedMemory:
    """The server's registry of CUDA shared memory regions (one per server, shared by the
    front ends; safe to call from any thread)."""

    def __init__(self) -> None:
        self._regions: dict[str, _Region] = {}
        self._lock = threading.Lock()

    def __contains__(self, name: object) -> bool:
        return name in self._regions

    def register(self, name: str, raw_handle: bytes, device_id: int, byte_size: int) -> None:
        """Map the allocation of the 64-byte CUDA IPC ``raw_handle`` (made on
        ``device_id``) as region ``name`` of ``byte_size`` bytes.

        Raises:
            InvalidArgument: empty name, negative device, zero size, CUDA unusable here
                (why, and the alternative), or a handle CUDA refuses (its error).
            AlreadyExists: ``name`` is registered already.
        """
        where = f"failed to register CUDA shared memory region {name!r}"
        if not name:
            raise InvalidArgument("a shared memory region needs a name (region name)")
        if device_id < 0 or byte_size <= 0:
            raise InvalidArgument(
                f"{where}: device_id {device_id} must be >= 0 and byte_size {byte_size} > 0"
            )
        self.check_usable(name)
        if len(raw_handle) != cuda.IPC_HANDLE_BYTES:
            raise InvalidArgument(
                f"{where}: raw_handle holds {len(raw_handle)} bytes, but a CUDA IPC memory "
                f"handle (cudaIpcMemHandle_t) is {cuda.IPC_HANDLE_BYTES}; send the handle "
                f"cudaIpcGetMemHandle gave for memory allocated with cudaMalloc on device "
                f"{device_id}"
            )
        with self._lock:
            if name in self._regions:
                raise AlreadyExists(
                    f"shared memory region {name!r} already in manager; unregister it first "
                    "or pick another name"
                )
            try:
                pointer = cuda.runtime().ipc_open(bytes(raw_handle), device_id)
            except cuda.CudaError as exc:
                raise InvalidArgument(
                    f"{where}: {exc.message}; send the handle of memory another process "
                    f"allocated with cudaMalloc on device {device_id}"
                ) from None
            self._regions[name] = _Region(CudaRegionStatus(name, device_id, byte_size), pointer)

    def check_usable(self, name: str) -> None:
        """Refuse registering ``name`` where CUDA cannot be used.

        Raises:
            InvalidArgument: naming why (the CUDA runtime's words) and the alternative.
        """
        why = cuda.unavailable()
        if why is not None:
            raise InvalidArgument(
                f"failed to register CUDA shared memory region {name!r}: CUDA is not "
                f"available on this server ({why}); {SYSTEM_INSTEAD}"
            )

    def unregister(self, name: str = "") -> None:
        """Take region ``name`` (every region when empty) out of the registry; its memory
        is unmapped once no in-flight request reads it. Unknown names are fine."""
        with self._lock:
            names = [name] if name else list(self._regions)
            regions = [self._regions.pop(n) for n in names if n in self._regions]
        for region in regions:
            region.release()

    def status(self, name: str = "") -> list[CudaRegionStatus]:
        """The region ``name``, or every region (registration order) when empty.

        Raises:
            NotFound: no CUDA region is registered as ``name``.
        """
        with self._lock:
            if not name:
                return [region.status for region in self._regions.values()]
            if name not in self._regions:
                raise NotFound(f"Unable to find cuda shared memory region: {name!r}")
            return [self._regions[name].status]

    def read(self, ref: TensorRef) -> cuda.DeviceArray:
        """The ``ref.byte_size`` bytes of an input as a device array of bytes (no copy),
        holding the region until it is dropped.

        Raises:
            NotFound: unknown region. InvalidArgument: the range passes the region's end.
        """
        region = self._region(ref, "input")
        return cuda.DeviceArray(
            region.pointer + ref.offset,
            (ref.byte_size,),
            np.dtype(np.uint8),
            region.status.device_id,
            region.lease(),
        )

    def write(self, ref: TensorRef, source: int, size: int, where: str) -> None:
        """Copy ``size`` bytes from ``source`` (a host or device address) to the start of
        ``ref``'s range (checked: :meth:`check`).

        Raises:
            NotFound, InvalidArgument: as :meth:`check`.
        """
        self.check(ref, where, size)
        region = self._region(ref, where)
        cuda.default_copier().copy(region.pointer + ref.offset, source, size)

    def check(self, ref: TensorRef, where: str, size: int = 0) -> None:
        """Raise as :meth:`write` of ``size`` bytes would, touching nothing.

        Raises:
            NotFound: unknown region. InvalidArgument: the range passes the region's end,
                or ``size`` is more than ``ref.byte_size``.
        """
        self._region(ref, where)
        if size > ref.byte_size:
            raise InvalidArgument(
                f"{where}: shared memory region {ref.region!r} at offset {ref.offset} has "
                f"shared_memory_byte_size {ref.byte_size} bytes, but the output needs {size} "
                f"bytes to hold the results; give it at least {size} bytes"
            )

    def close(self) -> int:
        """Unregister every region (server shutdown); how many there were."""
        count = len(self._regions)
        self.unregister()
        return count

    def _region(self, ref: TensorRef, where: str) -> _Region:
        with self._lock:
            region = self._regions.get(ref.region)
        if region is None:
            raise NotFound(
                f"{where}: Unable to find shared memory region: {ref.region!r}; register it "
                "first (CudaSharedMemoryRegister, or POST "
                f"/v2/cudasharedmemory/region/{ref.region}/register)"
            )
        size = region.status.byte_size
        if ref.offset + ref.byte_size > size:
            raise InvalidArgument(
                f"{where}: shared memory region {ref.region!r} holds {size} bytes, but "
                f"shared_memory_offset {ref.offset} + shared_memory_byte_size "
                f"{ref.byte_size} = {ref.offset + ref.byte_size} bytes passes its end "
                "(Invalid offset + byte size for shared memory region)"
            )
        return region
