"""The local engine cache: one verified model directory per engine-cache key.

Layout: ``<root>/<key hex>/`` holds ``manifest.json``, the engine (with its data files) and
``report.json`` as a build produced them (:mod:`mmaas.build.cache.key` computes the key; the
manifest records it in ``build.engine_key``). ``root`` is ``$MMAAS_CACHE_DIR/engines``
(default ``~/.cache/mmaas/engines``). An entry is written to a temp directory beside it and
renamed into place under a per-key file lock, so readers see a whole entry or none. Every
entry is verified when used (the manifest's self-digest, the blake3/sha256 and size of the
engine and of each engine data file, the report, the key): a damaged or foreign entry is
dropped, the reason reported, and the build compiles instead. It is never served.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from mmaas.core.errors import IntegrityError
from mmaas.core.files import link_or_copy
from mmaas.core.manifest import Manifest
from mmaas.core.model_dir import REPORT_NAME, verify_engine_dir

DEFAULT_ROOT = Path("~/.cache/mmaas")
LOCK_TIMEOUT_S = 600


@dataclass(frozen=True)
class Checkout:
    """What the cache found for a key: ``path`` is the verified copy (None on a miss) and
    ``note`` says what happened (``hit``, ``miss``, or why an entry was dropped)."""

    path: Path | None
    note: str

    @property
    def hit(self) -> bool:
        """True when a verified entry was checked out."""
        return self.path is not None


class EngineCache:
    """The cache under ``root`` (created on first write); see the module docstring."""

    def __init__(self, root: Path | None = None) -> None:
        base = Path(os.environ.get("MMAAS_CACHE_DIR") or DEFAULT_ROOT)
        self.root = (root or base / "engines").expanduser()

    def checkout(self, key: str, dest: Path) -> Checkout:
        """Link (or copy) the entry for ``key`` into the new directory ``dest`` and verify
        the copy. A missing entry is a miss; a damaged one is removed and reported."""
        entry = self.entry_path(key)
        with self._locked(key):
            if not entry.is_dir():
                return Checkout(None, f"engine cache miss {key}")
            _copy_entry(entry, dest)
            try:
                verify_entry(dest, key)
            except IntegrityError as exc:
                shutil.rmtree(dest, ignore_errors=True)
                shutil.rmtree(entry, ignore_errors=True)
                return Checkout(
                    None, f"engine cache entry {key} dropped (corrupt: {exc}); compiling instead"
                )
        return Checkout(dest, f"engine cache hit {key}")

    def store(self, key: str, model_dir: Path) -> bool:
        """Add ``model_dir`` (a verified build output) as the entry for ``key``; False when
        an intact entry was already there (it is kept).

        Raises:
            IntegrityError: ``model_dir`` fails verification or was built for another key.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        incoming = Path(tempfile.mkdtemp(dir=self.root, prefix=f".incoming-{_hex(key)}."))
        try:
            _copy_entry(model_dir, incoming / "entry")
            verify_entry(incoming / "entry", key)
            with self._locked(key):
                entry = self.entry_path(key)
                if entry.is_dir() and _intact(entry, key):
                    return False
                shutil.rmtree(entry, ignore_errors=True)
                (incoming / "entry").rename(entry)
                return True
        finally:
            shutil.rmtree(incoming, ignore_errors=True)

    def entry_path(self, key: str) -> Path:
        """Where the entry for ``key`` lives (it may not exist)."""
        return self.root / _hex(key)

    @contextmanager
    def _locked(self, key: str) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.root / f".{_hex(key)}.lock"), timeout=LOCK_TIMEOUT_S):
            yield


def verify_entry(directory: Path, key: str) -> Manifest:
    """Verify a cache entry: manifest self-digest, hashes and sizes of the engine and its
    data files, ``report.json`` equal to the manifest's report, and ``build.engine_key``
    equal to ``key``.

    Raises:
        IntegrityError: naming what differs.
    """
    manifest = verify_engine_dir(directory)
    recorded = manifest.build.get("engine_key")
    if recorded != key:
        raise IntegrityError(f"{directory}: entry was built for key {recorded}, not {key}")
    try:
        report = json.loads((directory / REPORT_NAME).read_text())
    except (OSError, ValueError) as exc:
        raise IntegrityError(f"{directory / REPORT_NAME}: unreadable ({exc})") from exc
    if report != manifest.report:
        raise IntegrityError(f"{directory / REPORT_NAME}: differs from the manifest's report")
    return manifest


def _intact(entry: Path, key: str) -> bool:
    try:
        verify_entry(entry, key)
    except IntegrityError:
        return False
    return True


def _copy_entry(source: Path, dest: Path) -> None:
    shutil.copytree(source, dest, copy_function=link_or_copy)
    dest.chmod(0o755)


def _hex(key: str) -> str:
    algo, _, digest = key.partition(":")
    if algo != "sha256" or len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
        raise ValueError(f"not an engine-cache key: {key!r}")
    return digest
