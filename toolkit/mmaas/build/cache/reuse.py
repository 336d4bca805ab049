"""Engine reuse for ``mmaas build``: look the key up in the local cache, then the registry
(pull a hit), and keep a freshly compiled engine (store it, push it).

A registry that cannot be reached or refuses the credentials costs the build its shared
cache, not the build: the reason is reported and the engine is compiled (or kept local).
A pulled entry is used only after the local cache verified it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mmaas.build.cache.local import EngineCache
from mmaas.build.cache.registry import cache_reference, pull_entry, push_entry
from mmaas.build.registry import RegistryTarget
from mmaas.build.registry_calls import credentials_from_env
from mmaas.core.errors import DockerError, IntegrityError, RegistryError

Say = Callable[[str], None]


@dataclass(frozen=True)
class CacheOptions:
    """How a build uses the engine cache.

    Attributes:
        enabled: look up and store engines at all.
        root: the local cache directory (None: ``$MMAAS_CACHE_DIR/engines`` or
            ``~/.cache/mmaas/engines``).
        registry: share entries through this registry (pull a hit, push a miss), or None.
        reuse_image: with ``enabled``, run no Docker build when the local image of the
            same build digest is the one a recorded build verified
            (:mod:`mmaas.build.current`); False runs the builds anyway.
    """

    enabled: bool = True
    root: Path | None = None
    registry: RegistryTarget | None = None
    reuse_image: bool = True


@dataclass(frozen=True)
class Reuse:
    """The lookup's outcome: ``path`` of the verified entry to stamp (None: compile) and
    ``status``: ``hit``, ``hit-registry``, ``miss`` or ``off``."""

    path: Path | None
    status: str

    @property
    def hit(self) -> bool:
        """True when a verified cached engine is to be used."""
        return self.path is not None


def note(message: str) -> None:
    """Report one line of build progress on stderr (``mmaas: <message>``)."""
    print(f"mmaas: {message}", file=sys.stderr, flush=True)


def reuse_engine(
    model: str, key: str | None, cache: CacheOptions, dest: Path, say: Say = note
) -> Reuse:
    """Check the entry for ``key`` out into ``dest`` (a new directory) from the local cache,
    else from ``cache.registry``; ``model`` names the registry's cache image."""
    if key is None or not cache.enabled:
        return Reuse(None, "off")
    store = EngineCache(cache.root)
    found = store.checkout(key, dest)
    if found.hit:
        say(f"{found.note} (local cache {store.root})")
        return Reuse(found.path, "hit")
    if found.note != f"engine cache miss {key}":
        say(found.note)
    if cache.registry is not None and _pulled(model, key, cache.registry, store, dest, say):
        return Reuse(dest, "hit-registry")
    say(f"engine cache miss {key}: compiling")
    return Reuse(None, "miss")


def keep_engine(
    model: str, key: str, engine_dir: Path, cache: CacheOptions, say: Say = note
) -> None:
    """Store the freshly compiled and verified ``engine_dir`` under ``key``, and push it to
    ``cache.registry`` when set.

    Raises:
        IntegrityError: ``engine_dir`` fails verification or was built for another key.
    """
    if not cache.enabled:
        return
    store = EngineCache(cache.root)
    if store.store(key, engine_dir):
        say(f"engine cached as {key} in {store.root}")
    if cache.registry is None:
        return
    try:
        pushed = push_entry(
            cache.registry, model, key, store.entry_path(key), credentials=credentials_from_env()
        )
    except (RegistryError, DockerError) as exc:
        say(f"engine cache entry not pushed ({exc.message}); it stays local")
        return
    say(
        f"engine cache entry pushed: {cache_reference(cache.registry, model, key)} "
        f"({pushed.digest})"
    )


def _pulled(
    model: str, key: str, registry: RegistryTarget, store: EngineCache, dest: Path, say: Say
) -> bool:
    reference = cache_reference(registry, model, key)
    incoming = dest.with_name(dest.name + ".pulled")
    try:
        if not pull_entry(registry, model, key, incoming, credentials=credentials_from_env()):
            return False
        store.store(key, incoming)
    except (RegistryError, DockerError) as exc:
        say(f"engine cache registry not used ({exc.message})")
        return False
    except IntegrityError as exc:
        say(f"engine cache entry {reference} rejected ({exc.message}); compiling instead")
        return False
    found = store.checkout(key, dest)
    if found.hit:
        say(f"{found.note} (pulled from {reference})")
    return found.hit
