"""The timing cache of one TensorRT compile, told truthfully (case C8).

Check the stored cache out into the engine directory (``trtexec/timing.cache``), let
trtexec run, then decide from trtexec's own log what happened to it
(:class:`~mmaas.backends.tensorrt.builder.trtexec.log.TimingCacheEvents`):

* ``reused``: trtexec loaded the stored cache (``Loaded N bytes of timing cache``, N its
  size) and refused none of it;
* ``rejected``: trtexec refused the stored cache ("Magic tag does not match", a cache of
  another release or device...) and built without it; the stored entry is dropped unless
  trtexec wrote a valid replacement, and the build warns on the console;
* ``dropped``: the build failed with the stored cache and was retried once without it;
* ``new``: there was none to reuse; ``off``: ``build.timing_cache: false``.

What trtexec writes back is stored only when it is valid: the run passed and trtexec said
it saved exactly the bytes the file holds (``Saved N bytes of timing cache to``). A cache
another build stored meanwhile is merged with TensorRT's ``ITimingCache.combine`` where
the tensorrt module is there, else replaced, and the report says which.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmaas.backends.tensorrt.builder.timing_cache import CacheKey, Checkout, TimingCacheStore
from mmaas.backends.tensorrt.builder.trtexec.log import TrtexecLog


class CacheRun:
    """The timing cache of one compile: checkout, retry without it, commit.

    Args:
        enabled: ``build.timing_cache``. verify: ``build.tensorrt.timing_cache_verify``.
        cache_dir: the store's directory (None: its default).
        key: the cache key (TensorRT version, compute capability, GPU).
        work: where the private copy goes (``<engine dir>/trtexec``).
    """

    def __init__(
        self, enabled: bool, verify: bool, cache_dir: Path | None, key: CacheKey, work: Path
    ) -> None:
        self.enabled, self.verify, self.key = enabled, verify, key
        self.notes: list[str] = []
        self.warnings: list[str] = []
        self.dropped = False
        self.store = TimingCacheStore(cache_dir)
        self.checkout = (
            self.store.checkout(key, work)
            if enabled
            else Checkout(work / "timing.cache", False, "")
        )
        if enabled:
            self.notes.append(self.checkout.note)

    @property
    def path(self) -> Path:
        """The private copy trtexec reads and writes."""
        return self.checkout.path

    @property
    def offered(self) -> bool:
        """True when trtexec is handed a stored cache."""
        return self.checkout.reused and not self.dropped

    def retry_without_stored(self) -> None:
        """Drop the stored cache (it made the build fail) for the one retry."""
        self.store.discard(self.key)
        self.path.unlink(missing_ok=True)
        self.dropped = True
        self.notes.append(
            "the build failed with the stored timing cache; dropped it and retried once without it"
        )

    def finish(self, log: TrtexecLog) -> dict[str, Any]:
        """Judge the run's cache from ``log`` (a passed run), store what trtexec wrote when
        valid, and return the report's ``timing_cache`` section: ``enabled``, ``status``,
        ``reused`` (True only for ``reused``), ``rejected`` (trtexec's line), ``key``,
        ``verify``, ``notes``, ``warnings`` (what the console must show) and
        ``stored_bytes``."""
        if not self.enabled:
            return {"enabled": False, "status": "off", "reused": False}
        events = log.timing_cache
        status = self._status(events.rejected, events.loaded_bytes)
        stored = self._store(events.saved_bytes, status)
        return {
            "enabled": True,
            "status": status,
            "reused": status == "reused",
            "rejected": events.rejected if status == "rejected" else None,
            "key": self.key.slug,
            "verify": self.verify,
            "notes": self.notes,
            "warnings": self.warnings,
            "stored_bytes": stored,
        }

    def _status(self, rejected: str | None, loaded: int | None) -> str:
        if self.dropped:
            return "dropped"
        if not self.checkout.reused:
            return "new"
        if rejected is not None:
            self.warnings.append(
                f"trtexec rejected the stored timing cache {self.key.slug} ({rejected}); "
                "this engine was built without it (every tactic timed again)"
            )
            return "rejected"
        if loaded != self.checkout.size_bytes:
            self.warnings.append(
                f"trtexec did not report loading the stored timing cache {self.key.slug} "
                f"({self.checkout.size_bytes} bytes; the log says {loaded}); "
                "it is not counted as reused"
            )
            return "not-loaded"
        return "reused"

    def _store(self, saved: int | None, status: str) -> int | None:
        size = self.path.stat().st_size if self.path.is_file() else 0
        if saved is None or saved != size or size == 0:
            why = (
                "trtexec did not report saving a timing cache"
                if saved is None
                else f"trtexec reported saving {saved} bytes, the file holds {size}"
            )
            self.notes.append(f"{why}: nothing stored")
            if status == "rejected":
                self.store.discard(self.key)
                self.notes.append(f"dropped the rejected {self.key.slug} from the store")
            return None
        base = self.checkout.sha256 if self.checkout.reused and not self.dropped else None
        commit = self.store.commit(self.key, self.path, base=base, merge=tensorrt_merge)
        self.notes.append(commit.note)
        if commit.contended:
            self.warnings.append(f"timing cache: {commit.note}")
        return commit.entry.size_bytes if commit.entry else None


def tensorrt_merge(stored: bytes, produced: bytes) -> bytes | None:
    """Both caches combined with TensorRT's ``ITimingCache.combine`` (entries of one
    release and device), or None when the tensorrt module is missing or they do not
    combine. Runs in the builder stage, where TensorRT and a GPU are."""
    try:
        import tensorrt as trt
    except ImportError:
        return None
    config = trt.Builder(trt.Logger(trt.Logger.ERROR)).create_builder_config()
    merged = config.create_timing_cache(stored)
    other = config.create_timing_cache(produced)
    if merged is None or other is None or not merged.combine(other, False):
        return None
    return bytes(merged.serialize())
