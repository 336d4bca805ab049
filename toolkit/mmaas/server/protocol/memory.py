"""The server's shared memory: its system regions (:mod:`.shm`) and CUDA regions
(:mod:`.cuda_shm`, a :class:`~.regions.RegionRegistry` kind) under one set of names, as
Triton's one shared memory manager keeps them: a name is registered once, of either kind,
and a tensor's ``shared_memory_region`` names a region of either kind. A request reads
and writes through a lease (:class:`MemoryLease`) that keeps its regions while it runs;
the front ends' status and unregister calls go to the registry of their kind.

Where a tensor lies and where it goes decide the copies (never through a Python bytes
object when both ends are memory): a system region input is read in place (host memory),
a CUDA one becomes a :class:`~mmaas.core.cuda.DeviceArray`; an output in host memory goes
to a system region by a host copy and to a CUDA region by one host-to-device copy, an
output the engine left in device memory to a CUDA region by one device-to-device copy and
to a system region through the host.
"""

from __future__ import annotations

import numpy as np

from mmaas.core.cuda import DeviceArray
from mmaas.server.protocol.cuda_shm import CudaSharedMemory
from mmaas.server.protocol.shm import SystemSharedMemory, TensorRef
from mmaas.server.status import AlreadyExists

Output = DeviceArray | bytes | memoryview  # an output's data as the request path writes it


class SharedMemory:
    """The system and CUDA registries of one server (see the module doc)."""

    def __init__(self, system: SystemSharedMemory | None = None) -> None:
        self.system = system or SystemSharedMemory()
        self.cuda = CudaSharedMemory()

    def register_system(self, name: str, key: str, offset: int, byte_size: int) -> None:
        """:meth:`SystemSharedMemory.register`, unless ``name`` is a CUDA region.

        Raises:
            AlreadyExists: ``name`` is registered (either kind). Others: as the registry's.
        """
        if self.cuda.holds(name):
            raise _taken(name, "CUDA")
        self.system.register(name, key, offset, byte_size)

    def register_cuda(self, name: str, raw_handle: bytes, device_id: int, byte_size: int) -> None:
        """:meth:`CudaSharedMemory.register`, unless ``name`` is a system region.

        Raises:
            AlreadyExists: ``name`` is registered (either kind). Others: as the registry's.
        """
        if self.system.holds(name):
            raise _taken(name, "system")
        self.cuda.register(name, raw_handle, device_id, byte_size)

    def lease(self) -> MemoryLease:
        """A new lease for one request (use it as a context manager)."""
        return MemoryLease(self)

    def close(self) -> int:
        """Unregister every region of both kinds (server shutdown); how many there were."""
        return self.system.close() + self.cuda.close()


class MemoryLease:
    """One request's use of shared memory of either kind: each region it names is pinned
    from its first use until the request ends (:mod:`.regions`' in-flight rule), so
    unregistering it meanwhile fails nothing; the kind is the one the name is registered
    as when first used."""

    def __init__(self, memory: SharedMemory) -> None:
        self.memory = memory
        self.system = memory.system.lease()
        self.cuda = memory.cuda.lease()

    def read(self, ref: TensorRef, where: str) -> memoryview | DeviceArray:
        """An input's ``ref.byte_size`` bytes: a read-only view of a system region, or a
        device array of bytes over a CUDA region (no copy either way).

        Raises:
            NotFound: no region of either kind. InvalidArgument: the range passes its end.
        """
        if self._is_cuda(ref.region):
            self.cuda.place(ref, where)
            return self.memory.cuda.read(ref, where)
        return self.system.read(ref, where)

    def check(self, ref: TensorRef, where: str, size: int = 0) -> None:
        """Raise as writing ``size`` bytes at ``ref`` would, touching nothing.

        Raises:
            NotFound: no region of either kind. InvalidArgument: past its end, or
                ``size`` more than ``ref.byte_size``.
        """
        if self._is_cuda(ref.region):
            self.cuda.check(ref, where, size)
        else:
            self.system.check(ref, where, size)

    def write(self, ref: TensorRef, data: Output, where: str) -> None:
        """Write an output's ``data`` (raw bytes or a flat byte view, or a device array) to
        ``ref`` (module doc for the copies).

        Raises:
            NotFound, InvalidArgument: as :meth:`check` of its size.
        """
        size = data.nbytes if isinstance(data, DeviceArray) else len(data)
        if self._is_cuda(ref.region):
            if isinstance(data, DeviceArray):
                source, kept = data.pointer, None
            else:
                kept = np.frombuffer(data, np.uint8)  # its address, alive for the copy
                source = kept.ctypes.data
            self.cuda.write(ref, source, size, where)
            return
        host = data.to_host().tobytes() if isinstance(data, DeviceArray) else data
        self.system.write(ref, host, where)

    def release(self) -> None:
        """Unpin every region this request pinned."""
        self.system.release()
        self.cuda.release()

    def __enter__(self) -> MemoryLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _is_cuda(self, name: str) -> bool:
        if self.cuda.pins(name) or self.system.pins(name):
            return self.cuda.pins(name)
        return self.memory.cuda.holds(name)


def _taken(name: str, kind: str) -> AlreadyExists:
    return AlreadyExists(
        f"shared memory region {name!r} already in manager (a {kind} shared memory region); "
        "unregister it first or pick another name"
    )
