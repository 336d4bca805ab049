"""Registered shared memory regions and the requests in flight that use them, for every
kind of region (system shared memory: :mod:`mmaas.server.protocol.shm`; a device-memory
kind subclasses :class:`RegionRegistry` the same way).

The in-flight rule, as Triton's shared memory manager keeps it: unregistering a region
never fails a request that already uses it. A request takes a :class:`Lease` for its
lifetime (the data plane: from reading its inputs to writing its outputs); the first use
of a region name through the lease pins that region. ``unregister`` takes the name off at
once (a new request naming it gets NOT_FOUND; the name may be registered again) but a
pinned region stays mapped, listed by the status calls as *pending*, until the last
request pinning it releases its lease; then it is closed. Server shutdown closes every
region, pinned or not (:meth:`RegionRegistry.close`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Generic, Protocol, Self, TypeVar

from mmaas.server.status import AlreadyExists, NotFound


class Region(Protocol):
    """What a registry holds: a mapped region that can be closed (unmapped)."""

    def close(self) -> None:
        """Unmap the region (its memory must not be touched afterwards)."""
        ...


R = TypeVar("R", bound=Region)


@dataclass(eq=False)
class Entry(Generic[R]):
    """One registered region: its name, the region, how many leases pin it, and whether
    it was unregistered while pinned (``pending``: closed when ``users`` drops to 0)."""

    name: str
    region: R
    users: int = 0
    pending: bool = False


class RegionRegistry(Generic[R]):
    """Named regions, each kept while a request in flight uses it (module docstring);
    safe to call from any thread. ``kind`` names the regions in messages (``system``);
    ``missing(name, where)`` words the error for a tensor naming a region that is not
    registered (each kind names its own register call)."""

    def __init__(self, kind: str, missing: Callable[[str, str], NotFound]) -> None:
        self.kind = kind
        self._active: dict[str, Entry[R]] = {}
        self._pending: list[Entry[R]] = []
        self._lock = threading.Lock()
        self._missing = missing

    def unregister(self, name: str = "") -> None:
        """Take region ``name`` (every region when empty) off the registry: closed now,
        or, while requests in flight pin it, when the last of them ends. Unknown names and
        an empty registry are fine (Triton answers both with success)."""
        with self._lock:
            names = [name] if name else list(self._active)
            taken = [self._active.pop(n) for n in names if n in self._active]
            idle = [entry for entry in taken if not entry.users]
            for entry in taken:
                if entry.users:
                    entry.pending = True
                    self._pending.append(entry)
        for entry in idle:
            entry.region.close()

    def holds(self, name: str) -> bool:
        """Whether ``name`` is registered here (not only pending)."""
        with self._lock:
            return name in self._active

    def entries(self, name: str = "") -> list[Entry[R]]:
        """The registered regions (registration order), then those pending unregistration
        (each with its ``pending`` flag); with ``name``, only that name's.

        Raises:
            NotFound: ``name`` is neither registered nor pending.
        """
        with self._lock:
            found = [*self._active.values(), *self._pending]
        if name:
            found = [entry for entry in found if entry.name == name]
            if not found:
                raise NotFound(f"Unable to find {self.kind} shared memory region: {name!r}")
        return found

    def lease(self) -> Lease[R]:
        """A new lease for one request (use it as a context manager)."""
        return Lease(self)

    def close(self) -> int:
        """Close every region, pending or pinned ones too (server shutdown); how many were
        registered."""
        with self._lock:
            entries = [*self._active.values(), *self._pending]
            count = len(self._active)
            self._active.clear()
            self._pending.clear()
            for entry in entries:
                entry.pending = False  # closed here: a lease released later closes nothing
        for entry in entries:
            entry.region.close()
        return count

    def _add(self, name: str, make: Callable[[], R], key: str) -> None:
        """Register the region ``make()`` returns under ``name`` (made under the lock, so
        two registrations of one name cannot both map).

        Raises:
            AlreadyExists: ``name`` is registered (``key`` names what it holds).
        """
        with self._lock:
            if name in self._active:
                raise AlreadyExists(
                    f"shared memory region {name!r} already in manager (key {key!r}); "
                    "unregister it first or pick another name"
                )
            self._active[name] = Entry(name, make())

    def pin(self, name: str, where: str) -> Entry[R]:
        """Pin the region registered as ``name`` for one more lease (:class:`Lease`).

        Raises:
            NotFound: no region is registered as ``name``.
        """
        with self._lock:
            entry = self._active.get(name)
            if entry is None:
                raise self._missing(name, where)
            entry.users += 1
            return entry

    def unpin(self, entries: list[Entry[R]]) -> None:
        """Unpin ``entries`` once each; close those unregistered that no lease pins."""
        with self._lock:
            done = []
            for entry in entries:
                entry.users -= 1
                if entry.pending and not entry.users:
                    self._pending.remove(entry)
                    done.append(entry)
        for entry in done:
            entry.region.close()


class Lease(Generic[R]):
    """The regions one request uses, pinned from their first use until :meth:`release`
    (or the end of its ``with`` block)."""

    def __init__(self, registry: RegionRegistry[R]) -> None:
        self.registry = registry
        self._pinned: dict[str, Entry[R]] = {}

    def region(self, name: str, where: str) -> R:
        """The region registered as ``name``, pinned for this lease.

        Raises:
            NotFound: no region is registered as ``name`` (``where`` names the tensor).
        """
        entry = self._pinned.get(name)
        if entry is None:
            entry = self._pinned[name] = self.registry.pin(name, where)
        return entry.region

    def pins(self, name: str) -> bool:
        """Whether this lease pinned the region ``name``."""
        return name in self._pinned

    def release(self) -> None:
        """Unpin every region this lease pinned (closing those unregistered meanwhile)."""
        pinned, self._pinned = list(self._pinned.values()), {}
        self.registry.unpin(pinned)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.release()
