"""System shared memory: Triton's shared-memory extension (system part), protocol-neutral.

A client creates a POSIX shared memory object (``shm_open`` + ``ftruncate``, e.g.
``tritonclient.utils.shared_memory.create_shared_memory_region``), registers a *region* of
it under a name (``key`` = the object's name, ``offset`` and ``byte_size`` in bytes), and
then names the region in a tensor's parameters instead of sending the data:
``shared_memory_region``, ``shared_memory_offset`` (bytes into the region, default 0) and
``shared_memory_byte_size``. Inputs are read from, and outputs written to, exactly
``[offset, offset + byte_size)`` of the region; every range is checked against the region
and the region against its object before any byte is touched. Both front ends (gRPC
``SystemSharedMemory*`` RPCs, HTTP ``/v2/systemsharedmemory/...``) call one
:class:`SystemSharedMemory`; regions are unmapped on unregister and at shutdown
(:meth:`SystemSharedMemory.close`). Messages follow Triton's
(``src/shared_memory_manager.cc``) and also name the offset and sizes at fault.

CUDA regions: :mod:`.cuda_shm`; both kinds under one set of names: :mod:`.memory`.
"""

from __future__ import annotations

import gc
import mmap
import os
import stat
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mmaas.server.status import AlreadyExists, InvalidArgument, NotFound

SHM_DIR = Path("/dev/shm")  # where Linux's shm_open keeps its objects
NAME_MAX = 255
REGION = "shared_memory_region"
OFFSET = "shared_memory_offset"
BYTE_SIZE = "shared_memory_byte_size"


@dataclass(frozen=True)
class RegionStatus:
    """A registered region as the status calls report it (Triton's
    ``SystemSharedMemoryStatusResponse.RegionStatus``): sizes in bytes."""

    name: str
    key: str
    offset: int
    byte_size: int


@dataclass(frozen=True)
class TensorRef:
    """Where a tensor's data lies: ``byte_size`` bytes at ``offset`` bytes into the region
    ``region`` (the KServe v2 tensor parameters of the extension)."""

    region: str
    offset: int
    byte_size: int


class _Region:
    """One mapped region: ``view`` of exactly ``byte_size`` bytes at the object's
    ``offset`` (the map starts at the page boundary below it, as mmap needs)."""

    def __init__(self, status: RegionStatus, fd: int) -> None:
        self.status = status
        start = status.offset - status.offset % mmap.ALLOCATIONGRANULARITY
        self.map = mmap.mmap(fd, status.offset - start + status.byte_size, offset=start)
        self.view = memoryview(self.map)[status.offset - start :]

    def close(self) -> None:
        """Unmap now, or (while an in-flight request still reads an input from it) as soon
        as the last array over it is freed."""
        self.view.release()
        for attempt in range(2):
            try:
                self.map.close()
                return
            except BufferError:  # exported to an array: a finished request's, in a cycle?
                if attempt == 0:
                    gc.collect()
        # still read by an in-flight request: unmapped when its last array is freed


class SystemSharedMemory:
    """The server's registry of system shared memory regions (one per server, shared by
    the front ends; safe to call from any thread)."""

    def __init__(self, directory: Path = SHM_DIR) -> None:
        self.directory = directory
        self._regions: dict[str, _Region] = {}
        self._lock = threading.Lock()

    def register(self, name: str, key: str, offset: int, byte_size: int) -> None:
        """Map ``[offset, offset + byte_size)`` of the shared memory object ``key`` as
        region ``name``.

        Raises:
            InvalidArgument: empty name, bad key (empty, ``/`` inside, not a regular file),
                no such object, negative offset, zero byte size, or a range past the end of
                the object (its size is named).
            AlreadyExists: ``name`` is registered already.
        """
        if not name:
            raise InvalidArgument("a shared memory region needs a name (region name)")
        path = self._path(name, key)
        if offset < 0 or byte_size <= 0:
            raise InvalidArgument(
                f"failed to register shared memory region {name!r}: offset {offset} and "
                f"byte_size {byte_size} must be >= 0 and > 0 bytes"
            )
        with self._lock:
            if name in self._regions:
                raise AlreadyExists(
                    f"shared memory region {name!r} already in manager (key "
                    f"{self._regions[name].status.key!r}); unregister it first or pick "
                    "another name"
                )
            fd = self._open(name, key, path)
            try:
                size = os.fstat(fd).st_size
                if offset + byte_size > size:
                    raise InvalidArgument(
                        f"failed to register shared memory region {name!r}: offset {offset} "
                        f"+ byte_size {byte_size} = {offset + byte_size} bytes, but the "
                        f"shared memory object {key!r} holds {size} bytes"
                    )
                self._regions[name] = _Region(RegionStatus(name, key, offset, byte_size), fd)
            finally:
                os.close(fd)

    def unregister(self, name: str = "") -> None:
        """Unmap region ``name``, or every region when ``name`` is empty. Unknown names
        and an empty registry are fine (Triton answers both with success)."""
        with self._lock:
            names = [name] if name else list(self._regions)
            regions = [self._regions.pop(n) for n in names if n in self._regions]
        for region in regions:
            region.close()

    def status(self, name: str = "") -> list[RegionStatus]:
        """The region ``name``, or every region (registration order) when empty.

        Raises:
            NotFound: no region is registered as ``name``.
        """
        with self._lock:
            if not name:
                return [region.status for region in self._regions.values()]
            if name not in self._regions:
                raise NotFound(f"Unable to find system shared memory region: {name!r}")
            return [self._regions[name].status]

    def read(self, ref: TensorRef, where: str) -> memoryview:
        """The ``ref.byte_size`` bytes of an input (read-only, no copy).

        Raises:
            NotFound: unknown region. InvalidArgument: the range passes the region's end.
        """
        return self._slice(ref, where).toreadonly()

    def write(self, ref: TensorRef, data: bytes | memoryview, where: str) -> None:
        """Copy an output's ``data`` to the start of ``ref``'s range.

        Raises:
            NotFound: unknown region. InvalidArgument: the range passes the region's end,
                or the output needs more than ``ref.byte_size`` bytes (nothing is written).
        """
        target = self._slice(ref, where)
        _check_fits(ref, len(data), where)
        target[: len(data)] = data

    def check(self, ref: TensorRef, where: str, size: int = 0) -> None:
        """Raise as :meth:`write` of ``size`` bytes would, touching nothing (outputs are
        checked before computing, and again before the first is written)."""
        self._slice(ref, where).release()
        _check_fits(ref, size, where)

    def close(self) -> int:
        """Unmap every region (server shutdown); how many there were."""
        count = len(self._regions)
        self.unregister()
        return count

    def _slice(self, ref: TensorRef, where: str) -> memoryview:
        with self._lock:
            region = self._regions.get(ref.region)
            if region is None:
                raise NotFound(
                    f"{where}: Unable to find shared memory region: {ref.region!r}; register "
                    "it first (SystemSharedMemoryRegister, or POST "
                    f"/v2/systemsharedmemory/region/{ref.region}/register)"
                )
            size = region.status.byte_size
            if ref.offset + ref.byte_size > size:
                raise InvalidArgument(
                    f"{where}: shared memory region {ref.region!r} holds {size} bytes, but "
                    f"shared_memory_offset {ref.offset} + shared_memory_byte_size "
                    f"{ref.byte_size} = {ref.offset + ref.byte_size} bytes passes its end "
                    "(Invalid offset + byte size for shared memory region)"
                )
            return region.view[ref.offset : ref.offset + ref.byte_size]

    def _path(self, name: str, key: str) -> Path:
        base = key.lstrip("/")  # shm_open's rule: leading slashes are not part of the name
        if not base or "/" in base or base in (".", "..") or "\0" in base or len(base) > NAME_MAX:
            raise InvalidArgument(
                f"cannot register shared memory region {name!r} - invalid shm key {key!r}: "
                "a key is one POSIX shared memory object name, '/' then up to 255 "
                "characters without '/', as shm_open takes it"
            )
        return self.directory / base

    def _open(self, name: str, key: str, path: Path) -> int:
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise InvalidArgument(
                f"Unable to open shared memory region: {key!r} for region {name!r}: "
                f"{exc.strerror}; create it (shm_open) before registering it"
            ) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise InvalidArgument(f"shm key {key!r} of region {name!r} is not a shm object")
        return fd


def tensor_ref(parameters: Mapping[str, object], where: str) -> TensorRef | None:
    """The shared memory place of a tensor from its KServe v2 parameters, or None when it
    names no region.

    Raises:
        InvalidArgument: offset or byte size without a region, a region without a byte
            size, or values of the wrong type or sign.
    """
    region = parameters.get(REGION)
    if region is None:
        stray = [key for key in (OFFSET, BYTE_SIZE) if key in parameters]
        if stray:
            raise InvalidArgument(f"{where}: {stray[0]!r} is set without {REGION!r}")
        return None
    if not isinstance(region, str) or not region:
        raise InvalidArgument(f"{where}: {REGION!r} must be a region name (a string)")
    if BYTE_SIZE not in parameters:
        raise InvalidArgument(f"{where}: {REGION!r} {region!r} needs {BYTE_SIZE!r} (bytes)")
    return TensorRef(
        region, _size(parameters, OFFSET, where, 0), _size(parameters, BYTE_SIZE, where, 0)
    )


def _check_fits(ref: TensorRef, size: int, where: str) -> None:
    if size > ref.byte_size:
        raise InvalidArgument(
            f"{where}: shared memory region {ref.region!r} at offset {ref.offset} has "
            f"shared_memory_byte_size {ref.byte_size} bytes, but the output needs {size} "
            f"bytes to hold the results; give it at least {size} bytes"
        )


def _size(parameters: Mapping[str, object], key: str, where: str, default: int) -> int:
    value = parameters.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgument(f"{where}: {key!r} must be a number of bytes >= 0, got {value!r}")
    return value
