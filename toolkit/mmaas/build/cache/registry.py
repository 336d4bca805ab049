"""Share engine-cache entries through a container registry, next to the model images.

An entry travels as a tiny cache image ``HOST/NS/<name>-engine-cache:<key hex>``: ``FROM
scratch`` with the entry's files under ``/engine`` (no base layers, so its size is the
entry's), labelled with the key and the engine hash. :func:`push_entry` builds and pushes it
(:func:`mmaas.build.registry.push_image`: login, retries, the digest the registry stored);
:func:`pull_entry` pulls it and copies ``/engine`` out. Pulled files are only candidates:
the local cache verifies them (:meth:`mmaas.build.cache.local.EngineCache.store`) before any
build uses them. Local cache images are removed once pushed or copied out.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from mmaas.build import docker as docker_engine
from mmaas.build.registry import PushResult, RegistryTarget, push_image
from mmaas.build.registry_calls import Credentials, check_registry_call, logged_in, retried
from mmaas.core.errors import RegistryError
from mmaas.core.files import link_or_copy
from mmaas.core.manifest import read_manifest

ENTRY_DIR = "/engine"
KEY_LABEL = "io.mmaas.engine-cache.key"
MISSING_WORDS = ("manifest unknown", "not found")
_MISSING = "missing"


def cache_name(model: str) -> str:
    """The cache image's name for ``model``: ``<model>-engine-cache``."""
    return f"{model}-engine-cache"


def cache_reference(target: RegistryTarget, model: str, key: str) -> str:
    """``HOST/NS/<model>-engine-cache:<key hex>``."""
    return f"{target.repository(cache_name(model))}:{key.partition(':')[2]}"


def push_entry(
    target: RegistryTarget,
    model: str,
    key: str,
    entry: Path,
    *,
    credentials: Credentials | None,
    attempts: int = 3,
) -> PushResult:
    """Build the cache image of the verified ``entry`` and push it.

    Raises:
        DockerError: the image build failed. RegistryError: the push failed.
    """
    reference = cache_reference(target, model, key)
    engine = read_manifest(entry).engine.blake3
    with tempfile.TemporaryDirectory(prefix="mmaas-cache-image-") as scratch:
        context = Path(scratch)
        shutil.copytree(entry, context / "engine", copy_function=link_or_copy)
        dockerfile = context / "Dockerfile"
        dockerfile.write_text(
            f"FROM scratch\nCOPY engine/ {ENTRY_DIR}/\n"
            f'LABEL {KEY_LABEL}="{key}" io.mmaas.engine.blake3="{engine}"\n'
            f'CMD ["{ENTRY_DIR}"]\n'
        )
        image_id = docker_engine.build(context, dockerfile, reference, echo=False)
    try:
        return push_image(
            reference,
            target,
            cache_name(model),
            key.partition(":")[2],
            credentials=credentials,
            attempts=attempts,
        )
    finally:
        remove_image(image_id)


def pull_entry(
    target: RegistryTarget,
    model: str,
    key: str,
    dest: Path,
    *,
    credentials: Credentials | None,
    attempts: int = 3,
    backoff_s: float = 1.0,
) -> bool:
    """Pull the cache image for ``key`` and copy its files into the new directory ``dest``;
    False when the registry has no such image.

    Raises:
        RegistryError: refused credentials, or unreachable after ``attempts`` tries.
    """
    reference = cache_reference(target, model, key)

    def pull() -> str:
        done = docker_engine.run(["pull", reference], config=config)
        if done.returncode != 0 and any(
            w in (done.stdout + done.stderr).lower() for w in MISSING_WORDS
        ):
            return _MISSING
        check_registry_call(done, f"docker pull {reference}", target.host)
        return reference

    with logged_in(target.host, credentials, attempts, backoff_s) as config:
        if retried(pull, target.host, attempts, backoff_s) == _MISSING:
            return False
    try:
        docker_engine.copy_from_image(reference, ENTRY_DIR, dest)
    finally:
        remove_image(reference)
    if not dest.is_dir():
        raise RegistryError(f"{reference}: the cache image holds no {ENTRY_DIR} directory")
    return True


def remove_image(image: str) -> None:
    """Remove a local image made or pulled by a build (an id removes every tag of it);
    a missing image is not an error. (Belongs in :mod:`mmaas.build.docker`.)"""
    docker_engine.run(["image", "rm", "--force", image])
