"""The host directory of TensorRT timing caches (``--timingCacheFile``) that mmaas manages.

A timing cache is only valid for the TensorRT version and GPU that timed its tactics
(TensorRT#2144, case C8), so every file is keyed by TensorRT version, compute capability
and GPU model: ``trt<version>-sm<cc>-<gpu>.cache`` with a ``.json`` record beside it
(the key, size in bytes, sha256, updated time). A foreign or damaged file is never handed
to trtexec: :meth:`TimingCacheStore.checkout` checks the record and the digest, removes a
bad pair and says why, and the build starts without a cache. Two builds at once are safe:
each works on a private copy, and :meth:`TimingCacheStore.commit` replaces the stored file
atomically under a file lock (the last finished build's cache wins; no half-written file).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from filelock import FileLock

from mmaas.core.files import atomic_write_text
from mmaas.core.hashing import file_digests

DEFAULT_ROOT = Path("~/.cache/mmaas/timing-caches")
LOCK_TIMEOUT_S = 600


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
    """A private copy for one build: ``path`` to pass to trtexec (may not exist yet) and
    ``note``, what the store found (``reused N bytes``, ``none yet``, or why it dropped
    a damaged or foreign cache)."""

    path: Path
    reused: bool
    note: str


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
        return Checkout(target, True, f"reused {entry.size_bytes} bytes of {key.slug}")

    def commit(self, key: CacheKey, produced: Path) -> CacheEntry | None:
        """Store ``produced`` (the cache trtexec wrote) as the cache for ``key``, replacing
        the old one atomically; None when trtexec wrote nothing (empty or missing)."""
        if not produced.is_file() or produced.stat().st_size == 0:
            return None
        with self._locked(key):
            self.root.mkdir(parents=True, exist_ok=True)
            final = self.root / f"{key.slug}.cache"
            _atomic_copy(produced, final)
            entry = CacheEntry(
                key, final, final.stat().st_size, file_digests(final)["sha256"], _now()
            )
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


def import_entry(store: TimingCacheStore, record: dict, data: bytes) -> CacheEntry:
    """Add a cache read from an export (its ``.json`` record and ``.cache`` bytes).

    Raises:
        ValueError: the record is malformed or the bytes do not match its sha256.
    """
    key = CacheKey(**record["key"])
    with tempfile.NamedTemporaryFile(dir=store.root, suffix=".import") as handle:
        handle.write(data)
        handle.flush()
        if file_digests(Path(handle.name))["sha256"] != record["sha256"]:
            raise ValueError(f"{key.slug}: bytes do not match the recorded sha256")
        entry = store.commit(key, Path(handle.name))
    if entry is None:
        raise ValueError(f"{key.slug}: empty cache")
    return entry


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


def _atomic_copy(source: Path, target: Path) -> None:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        shutil.copyfile(source, tmp)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
