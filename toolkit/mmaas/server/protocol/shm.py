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
:class:`SystemSharedMemory`; a region is unmapped on unregister, or when the last request
in flight that uses it ends (listed as pending until then: the in-flight rule of
:mod:`mmaas.server.protocol.regions`), and at shutdown. Messages follow Triton's
(``src/shared_memory_manager.cc``) and also name the offset and sizes at fault.

The server opens the client's objects in its own ``/dev/shm``: in a container it must
share the client's IPC namespace (``docker run --ipc=host``, or one Kubernetes pod) and run
as a user that may read and write them (``docker run --user``, or objects made mode
0666); the refusals say so.

CUDA regions: :mod:`.cuda_shm`; both kinds under one set of names: :mod:`.memory`.
"""

from __future__ import annotations

import gc
import mmap
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from mmaas.server.protocol.regions import Lease, RegionRegistry
from mmaas.server.status import InvalidArgument, NotFound

SHM_DIR = Path("/dev/shm")  # where Linux's shm_open keeps its objects
NAME_MAX = 255
REGION = "shared_memory_region"
OFFSET = "shared_memory_offset"
BYTE_SIZE = "shared_memory_byte_size"


@dataclass(frozen=True)
class RegionStatus:
    """A registered region as the status calls report it (Triton's
    ``SystemSharedMemoryStatusResponse.RegionStatus``): sizes in bytes; ``pending``: it
    was unregistered while requests in flight use it (mapped until they end)."""

    name: str
    key: str
    offset: int
    byte_size: int
    pending: bool = False


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


class SystemSharedMemory(RegionRegistry[_Region]):
    """The server's registry of system shared memory regions (one per server, shared by
    the front ends; safe to call from any thread). A request reads and writes through a
    :class:`SystemLease` (:meth:`lease`), which keeps its regions mapped while it runs
    (:mod:`mmaas.server.protocol.regions`: the in-flight rule)."""

    def __init__(self, directory: Path = SHM_DIR) -> None:
        super().__init__("system", _missing)
        self.directory = directory

    def register(self, name: str, key: str, offset: int, byte_size: int) -> None:
        """Map ``[offset, offset + byte_size)`` of the shared memory object ``key`` as
        region ``name``.

        Raises:
            InvalidArgument: empty name, bad key (empty, ``/`` inside, not a regular file),
                no such object in this server's ``/dev/shm`` or one it may not open (each
                says what the deployment needs), negative offset, zero byte size, or a
                range past the end of the object (its size is named).
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

        def mapped() -> _Region:
            fd = _open(name, key, path)
            try:
                size = os.fstat(fd).st_size
                if offset + byte_size > size:
                    raise InvalidArgument(
                        f"failed to register shared memory region {name!r}: offset {offset} "
                        f"+ byte_size {byte_size} = {offset + byte_size} bytes, but the "
                        f"shared memory object {key!r} holds {size} bytes"
                    )
                return _Region(RegionStatus(name, key, offset, byte_size), fd)
            finally:
                os.close(fd)

        self._add(name, mapped, key)

    def status(self, name: str = "") -> list[RegionStatus]:
        """The region ``name``, or every region (registration order) when empty; regions
        unregistered while requests in flight use them follow, ``pending``.

        Raises:
            NotFound: no region is registered (or pending) as ``name``.
        """
        return [replace(entry.region.status, pending=entry.pending) for entry in self.entries(name)]

    def lease(self) -> SystemLease:
        """A new lease for one request (use it as a context manager)."""
        return SystemLease(self)

    def _path(self, name: str, key: str) -> Path:
        base = key.lstrip("/")  # shm_open's rule: leading slashes are not part of the name
        if not base or "/" in base or base in (".", "..") or "\0" in base or len(base) > NAME_MAX:
            raise InvalidArgument(
                f"cannot register shared memory region {name!r} - invalid shm key {key!r}: "
                "a key is one POSIX shared memory object name, '/' then up to 255 "
                "characters without '/', as shm_open takes it"
            )
        return self.directory / base


class SystemLease(Lease[_Region]):
    """One request's use of system shared memory: reads and writes by tensor place, each
    region pinned from its first use until the request ends."""

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
        check_fits(ref, len(data), where)
        target[: len(data)] = data

    def check(self, ref: TensorRef, where: str, size: int = 0) -> None:
        """Raise as :meth:`write` of ``size`` bytes would, touching nothing (outputs are
        checked before computing, and again before the first is written)."""
        self._slice(ref, where).release()
        check_fits(ref, size, where)

    def _slice(self, ref: TensorRef, where: str) -> memoryview:
        region = self.region(ref.region, where)
        check_range(ref, region.status.byte_size, where)
        return region.view[ref.offset : ref.offset + ref.byte_size]


def _missing(name: str, where: str) -> NotFound:
    return NotFound(
        f"{where}: Unable to find shared memory region: {name!r}; register it first "
        "(SystemSharedMemoryRegister, or POST "
        f"/v2/systemsharedmemory/region/{name}/register)"
    )


def _open(name: str, key: str, path: Path) -> int:
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InvalidArgument(
            f"Unable to open shared memory region: {key!r} for region {name!r}: no such "
            f"object in this server's {SHM_DIR}; the client creates it (shm_open), and the "
            "server must share the client's IPC namespace to see it: run the image with "
            "`docker run --ipc=host` (or the client's container with --ipc=container:<server>, "
            "or both in one Kubernetes pod)"
        ) from None
    except PermissionError:
        raise InvalidArgument(
            f"Unable to open shared memory region: {key!r} for region {name!r}: permission "
            f"denied: the server (uid {os.getuid()}) may not read and write the client's "
            "object; run the server as the client's user (`docker run --user UID`) or let "
            "the client create it readable and writable by the server's user (mode 0666)"
        ) from None
    except OSError as exc:
        raise InvalidArgument(
            f"Unable to open shared memory region: {key!r} for region {name!r}: {exc.strerror}"
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


def check_range(ref: TensorRef, region_size: int, where: str) -> None:
    """Raise InvalidArgument when ``ref``'s range (offset + byte size) passes the end of
    its region of ``region_size`` bytes (Triton's "Invalid offset + byte size for shared
    memory region"); system and CUDA regions alike."""
    if ref.offset + ref.byte_size > region_size:
        raise InvalidArgument(
            f"{where}: shared memory region {ref.region!r} holds {region_size} bytes, but "
            f"shared_memory_offset {ref.offset} + shared_memory_byte_size "
            f"{ref.byte_size} = {ref.offset + ref.byte_size} bytes passes its end "
            "(Invalid offset + byte size for shared memory region)"
        )


def check_fits(ref: TensorRef, size: int, where: str) -> None:
    """Raise InvalidArgument when an output of ``size`` bytes is more than ``ref``'s
    ``shared_memory_byte_size``; system and CUDA regions alike."""
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
