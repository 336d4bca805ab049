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

The registry is a :class:`~.regions.RegionRegistry` (the in-flight rule every kind of
region follows): a request pins the regions it reads through a lease, and a region
unregistered meanwhile is listed as pending and unmapped when the last such request ends.
Here an input's device array holds its lease (:meth:`CudaSharedMemory.read`), so the
region stays mapped while anything still reads it.

On a host where CUDA cannot be used (no CUDA runtime library, no visible device) a
registration is refused with INVALID_ARGUMENT naming why and the alternative (Triton
without GPU support refuses it too); status answers an empty list and unregister
succeeds, as perf_analyzer's clean-up calls need. Messages follow Triton's
(``src/shared_memory_manager.cc``) and also name the sizes at fault.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from mmaas.core import cuda
from mmaas.server.protocol.regions import Lease, RegionRegistry
from mmaas.server.protocol.shm import TensorRef, check_fits, check_range
from mmaas.server.status import InvalidArgument, NotFound

SYSTEM_INSTEAD = "use system shared memory (SystemSharedMemoryRegister, /v2/systemsharedmemory)"


@dataclass(frozen=True)
class CudaRegionStatus:
    """A registered region as the status calls report it (Triton's
    ``CudaSharedMemoryStatusResponse.RegionStatus``): its device and size in bytes;
    ``pending``: unregistered while requests in flight read it (mapped until they end)."""

    name: str
    device_id: int
    byte_size: int
    pending: bool = False


class _Region:
    """One mapped allocation: its device ``pointer``."""

    def __init__(self, status: CudaRegionStatus, pointer: int) -> None:
        self.status = status
        self.pointer = pointer

    def close(self) -> None:
        """Unmap it (``cudaIpcCloseMemHandle``)."""
        pointer, self.pointer = self.pointer, 0
        if pointer:
            cuda.runtime().ipc_close(pointer)


class CudaSharedMemory(RegionRegistry[_Region]):
    """The server's registry of CUDA shared memory regions (one per server, shared by the
    front ends; safe to call from any thread)."""

    def __init__(self) -> None:
        super().__init__("cuda", _missing)

    def register(self, name: str, raw_handle: bytes, device_id: int, byte_size: int) -> None:
        """Map the allocation of the 64-byte CUDA IPC ``raw_handle`` (made on
        ``device_id``) as region ``name`` of ``byte_size`` bytes.

        Raises:
            InvalidArgument: empty name, negative device, zero size, CUDA unusable here
                (why, and the alternative), a handle of another length, or one CUDA refuses
                (its error).
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

        def mapped() -> _Region:
            try:
                pointer = cuda.runtime().ipc_open(bytes(raw_handle), device_id)
            except cuda.CudaError as exc:
                raise InvalidArgument(
                    f"{where}: {exc.message}; send the handle of memory another process "
                    f"allocated with cudaMalloc on device {device_id}"
                ) from None
            return _Region(CudaRegionStatus(name, device_id, byte_size), pointer)

        self._add(name, mapped, f"device {device_id}")

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

    def status(self, name: str = "") -> list[CudaRegionStatus]:
        """The region ``name``, or every region (registration order, then the pending).

        Raises:
            NotFound: no CUDA region is registered or pending as ``name``.
        """
        return [replace(e.region.status, pending=e.pending) for e in self.entries(name)]

    def lease(self) -> CudaLease:
        """A new lease for one request (use it as a context manager)."""
        return CudaLease(self)

    def read(self, ref: TensorRef, where: str) -> cuda.DeviceArray:
        """The ``ref.byte_size`` bytes of an input as a device array of bytes (no copy),
        holding a lease of its own on the region until the array is dropped.

        Raises:
            NotFound: unknown region. InvalidArgument: the range passes the region's end.
        """
        lease = self.lease()
        region = lease.place(ref, where)
        return cuda.DeviceArray(
            region.pointer + ref.offset,
            (ref.byte_size,),
            np.dtype(np.uint8),
            region.status.device_id,
            _Held(lease),
        )


class CudaLease(Lease[_Region]):
    """The CUDA regions one request uses, with the range checks of its tensors."""

    def place(self, ref: TensorRef, where: str) -> _Region:
        """The region of ``ref``, pinned, once the range fits it.

        Raises:
            NotFound: unknown region. InvalidArgument: the range passes the region's end.
        """
        region = self.region(ref.region, where)
        check_range(ref, region.status.byte_size, where)
        return region

    def check(self, ref: TensorRef, where: str, size: int = 0) -> None:
        """Raise as :meth:`write` of ``size`` bytes would, touching nothing.

        Raises:
            NotFound, InvalidArgument: as :meth:`place`, or ``size`` is more than
                ``ref.byte_size``.
        """
        self.place(ref, where)
        check_fits(ref, size, where)

    def write(self, ref: TensorRef, source: int, size: int, where: str) -> None:
        """Copy ``size`` bytes from ``source`` (a host or device address) to the start of
        ``ref``'s range (checked first, as :meth:`check`)."""
        region = self.place(ref, where)
        check_fits(ref, size, where)
        cuda.default_copier().copy(region.pointer + ref.offset, source, size)


class _Held:
    """A device array's hold on its region: the lease, released when the array is freed."""

    def __init__(self, lease: CudaLease) -> None:
        self.lease = lease

    def __del__(self) -> None:
        self.lease.release()


def _missing(name: str, where: str) -> NotFound:
    return NotFound(
        f"{where}: Unable to find shared memory region: {name!r}; register it first "
        f"(CudaSharedMemoryRegister, or POST /v2/cudasharedmemory/region/{name}/register)"
    )
