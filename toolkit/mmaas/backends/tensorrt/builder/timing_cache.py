"""The host directory of TensorRT timing caches (``--timingCacheFile``) that mmaas manages.

A timing cache is only valid for the TensorRT version and GPU that timed its tactics
(TensorRT#2144, case C8), so every file is keyed by TensorRT version, compute capability
and GPU model: ``trt<version>-sm<cc>-<gpu>.cache`` with a ``.json`` record beside it
(the key, size in bytes, sha256, updated time). A foreign or damaged file is never handed
to trtexec: :meth:`TimingCacheStore.checkout` checks the record and the digest, removes a
bad pair and says why, and the build starts without a cache. Two builds at once are safe:
each works on a private copy, and :meth:`TimingCacheStore.commit` replaces the stored file
atomically under a file lock (no half-written file). No entry is lost silently: a build
commits against the cache it checked out (its sha256); when another build stored one in
between, the two are merged where a merge function is given (TensorRT's
``ITimingCache.combine``, in the builder stage), else this build's replaces it and the
commit says so, naming both.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from filelock import FileLock

from mmaas.core.files import atomic_write_text
from mmaas.core.hashing import bytes_digest, file_digests

DEFAULT_ROOT = Path("~/.cache/mmaas/timing-caches")
LOCK_TIMEOUT_S = 600
# (stored bytes, this build's bytes) -> the merged cache, or None when they cannot merge
Merge = Callable[[bytes, bytes], "bytes | None"]


@dataclass(frozen=True)
class CacheKey:
    """What a timing cache is tied to: ``tensorrt_version`` (``"10.13.2"``),
    ``compute_capability`` (``"8.6"``) and ``gpu_name`` (``"NVIDIA A10"``)."""

    tensorrt_version: str
    compute_capability: str
    gpu_name: str

    @property
    def slug(self) -> str:
        """File stem, e.g. ``trt10.13.2-sm86-nvidia-a10``."""
        gpu = re.sub(r"[^a-z0-9]+", "-", self.gpu_name.lower()).strip("-") or "gpu"
        return f"trt{self.tensorrt_version}-sm{self.compute_capability.replace('.', '')}-{gpu}"


@dataclass(frozen=True)
class CacheEntry:
    """One stored cache: its key, file, size in bytes, ``sha256:<hex>`` and ISO time."""

    key: CacheKey
    path: Path
    size_bytes: int
    sha256: str
    updated: str


@dataclass(frozen=True)
class Checkout:
    """A private copy for one build: ``path`` to pass to trtexec (may not exist yet),
    whether a stored cache was copied there (``reused``; its ``sha256`` and ``size_bytes``)
    and ``note``, what the store found (``reused N bytes``, ``none yet``, or why it
    dropped a damaged or foreign cache)."""

    path: Path
    reused: bool
    note: str
    sha256: str | None = None
    size_bytes: int | None = None


@dataclass(frozen=True)
class Commit:
    """What :meth:`TimingCacheStore.commit` stored (``entry``, None for nothing) and
    ``note``: how (``stored``, ``merged with ...``, ``replaced ...``, or why not)."""

    entry: CacheEntry | None
    note: str
    contended: bool = False


class TimingCacheStore:
    """Timing caches under ``root`` (created on first write)."""

    def __init__(self, root: Path | None = None) -> None:
        env = os.environ.get("MMAAS_TIMING_CACHE_DIR")
        self.root = (root or (Path(env) if env else DEFAULT_ROOT)).expanduser()

    def checkout(self, key: CacheKey, work_dir: Path) -> Checkout:
        """Copy the cache for ``key`` to ``work_dir/timing.cache`` when it is intact.

        A record that names another key, or a file whose sha256 differs from its record,
        is removed (reported in ``note``); the build then runs without a cache.
        """
        target = work_dir / "timing.cache"
        with self._locked(key):
            entry, problem = self._valid_entry(key)
            if problem:
                self._remove(key)
                return Checkout(target, False, f"dropped the stored timing cache: {problem}")
            if entry is None:
                return Checkout(target, False, f"no timing cache yet for {key.slug}")
            shutil.copyfile(entry.path, target)
        return Checkout(
            target,
            True,
            f"reused {entry.size_bytes} bytes of {key.slug}",
            entry.sha256,
            entry.size_bytes,
        )

    def commit(
        self,
        key: CacheKey,
        produced: Path,
        *,
        base: str | None = None,
        merge: Merge | None = None,
    ) -> Commit:
        """Store ``produced`` (the cache trtexec wrote, checked valid by the caller) as the
        cache for ``key``, atomically. ``base`` is the sha256 of the stored cache the build
        started from (None: it started from none). When the store holds another cache
        now (another build committed meanwhile), ``merge`` combines the two; without a
        merge, or when it fails, ``produced`` replaces it and the note says so.
        Nothing is stored when ``produced`` is missing or empty.
        """
        if not produced.is_file() or produced.stat().st_size == 0:
            return Commit(None, "trtexec wrote no timing cache; nothing stored")
        with self._locked(key):
            current, _ = self._valid_entry(key)
            data, note, contended = produced.read_bytes(), f"stored as {key.slug}", False
            if current is not None and current.sha256 != base:
                contended = True
                merged = merge(current.path.read_bytes(), data) if merge else None
                other = f"another build stored {key.slug} ({current.sha256[:19]}) meanwhile"
                if merged:
                    data, note = merged, f"{other}: merged this build's entries into it"
                else:
                    note = f"{other}: this build's cache replaced it (its entries are lost)"
            entry = self._write(key, data)
        return Commit(entry, f"{note} ({entry.size_bytes} bytes)", contended)

    def put(self, key: CacheKey, data: bytes) -> CacheEntry:
        """Store ``data`` as the cache for ``key`` unconditionally (an import), atomically."""
        with self._locked(key):
            return self._write(key, data)

    def _write(self, key: CacheKey, data: bytes) -> CacheEntry:
        self.root.mkdir(parents=True, exist_ok=True)
        final = self.root / f"{key.slug}.cache"
        _atomic_write_bytes(final, data)
        entry = CacheEntry(key, final, len(data), bytes_digest(data), _now())
        atomic_write_text(
            self.root / f"{key.slug}.json", json.dumps(_record(entry), indent=2) + "\n"
        )
        return entry

    def discard(self, key: CacheKey) -> None:
        """Remove the cache for ``key`` (after it made a build fail)."""
        with self._locked(key):
            self._remove(key)

    def entries(self) -> list[CacheEntry]:
        """Every stored cache with a readable record, sorted by file name."""
        found = []
        for record in sorted(self.root.glob("*.json")):
            entry = _read_entry(record)
            if entry is not None:
                found.append(entry)
        return found

    def _valid_entry(self, key: CacheKey) -> tuple[CacheEntry | None, str | None]:
        record, data = self.root / f"{key.slug}.json", self.root / f"{key.slug}.cache"
        if not data.exists():
            return None, None
        entry = _read_entry(record)
        if entry is None:
            return None, f"{data} has no readable record ({record.name}); it may be foreign"
        if entry.key != key:
            return None, f"{data} was made for {entry.key}, this build is {key}"
        if file_digests(data)["sha256"] != entry.sha256:
            return None, f"{data} is corrupt (sha256 differs from its record)"
        return entry, None

    def _remove(self, key: CacheKey) -> None:
        for suffix in (".cache", ".json"):
            (self.root / f"{key.slug}{suffix}").unlink(missing_ok=True)

    @contextmanager
    def _locked(self, key: CacheKey) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.root / f".{key.slug}.lock"), timeout=LOCK_TIMEOUT_S):
            yield


def checked_import(record: bytes, data: bytes) -> CacheKey:
    """The key of an exported pair (its ``.json`` record and ``.cache`` bytes) when the
    pair is whole.

    Raises:
        ValueError: the record is not a record of this store, names a key whose slug is
            not the pair's, or the bytes are empty or do not match its size and sha256.
    """
    try:
        raw = json.loads(record)
        key = CacheKey(**raw["key"])
        size, digest = int(raw["size_bytes"]), str(raw["sha256"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"unreadable record ({exc})") from exc
    if not data:
        raise ValueError("empty cache")
    if len(data) != size or bytes_digest(data) != digest:
        raise ValueError(
            f"bytes do not match the record ({len(data)} bytes, {bytes_digest(data)[:19]}; "
            f"recorded {size} bytes, {digest[:19]})"
        )
    return key


def _read_entry(record: Path) -> CacheEntry | None:
    try:
        raw = json.loads(record.read_text())
        key = CacheKey(**raw["key"])
        return CacheEntry(
            key, record.with_suffix(".cache"), int(raw["size_bytes"]), raw["sha256"], raw["updated"]
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _record(entry: CacheEntry) -> dict:
    return {
        "key": asdict(entry.key),
        "size_bytes": entry.size_bytes,
        "sha256": entry.sha256,
        "updated": entry.updated,
    }


def _atomic_write_bytes(target: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
