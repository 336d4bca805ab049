"""Push a built image to a container registry and return the digest the registry stored.

Each image is pushed as ``HOST/NAMESPACE/NAME:VERSION`` and under an immutable tag derived
from its engine hash (label ``io.mmaas.engine.blake3``): ``blake3-<first 16 hex>``, logged
in and retried as :mod:`mmaas.build.registry_calls` does every registry call. Registry
addresses follow Docker's reference grammar (:func:`parse_registry`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from mmaas.build import docker as docker_engine
from mmaas.build.registry_calls import Credentials, check_registry_call, logged_in, retried
from mmaas.core.errors import RegistryError, UsageError

ENGINE_LABEL = "io.mmaas.engine.blake3"
ENGINE_TAG_HEX = 16
# distribution/reference grammar: path components, a tag.
COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
# the registry host of a Docker reference (distribution/reference's grammar): domain
# components joined by dots (or a bracketed IPv6 address), an optional :port
_HOST = re.compile(
    r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
    r"|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$"
)
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST = re.compile(r"digest: (sha256:[0-9a-f]{64})")


@dataclass(frozen=True)
class RegistryTarget:
    """Where images go: ``host`` (``127.0.0.1:5000``, ``ghcr.io``) and a ``namespace``
    of zero or more lower-case path components (``mmaas``, ``my-org/models``)."""

    host: str
    namespace: str

    @property
    def address(self) -> str:
        """``HOST/NAMESPACE`` (``HOST`` without a namespace), as ``--registry`` takes it."""
        return "/".join(part for part in (self.host, self.namespace) if part)

    def repository(self, name: str) -> str:
        """``HOST/NAMESPACE/NAME`` (``HOST/NAME`` without a namespace)."""
        return f"{self.address}/{name}"


@dataclass(frozen=True)
class PushResult:
    """A pushed image.

    Attributes:
        repository: ``HOST/NAMESPACE/NAME``.
        tags: the tags pushed: the version, then ``blake3-<16 hex>``.
        digest: ``sha256:<hex>`` of the manifest the registry stored (same for every tag).
        engine: the engine hash from the image label, ``blake3:<hex>``.
    """

    repository: str
    tags: tuple[str, ...]
    digest: str
    engine: str

    @property
    def reference(self) -> str:
        """The immutable pull reference ``REPOSITORY@sha256:<hex>``."""
        return f"{self.repository}@{self.digest}"

    def to_json(self) -> dict[str, object]:
        """The fields plus ``reference``, as ``--json`` outputs print them."""
        return {
            "repository": self.repository,
            "tags": list(self.tags),
            "digest": self.digest,
            "reference": self.reference,
            "engine": self.engine,
        }


def parse_registry(text: str) -> RegistryTarget:
    """Parse ``HOST[:PORT][/NAMESPACE...]``.

    Raises:
        UsageError: the host is not a domain or IP address with an optional port, or a
            namespace component is not lower-case ``[a-z0-9]`` words joined by ``.``,
            ``_``, ``__`` or ``-`` (Docker's reference grammar).
    """
    host, _, namespace = text.strip().strip("/").partition("/")
    components = namespace.split("/") if namespace else []
    if not _HOST.match(host) or not all(COMPONENT.match(part) for part in components):
        raise UsageError(
            f"--registry {text!r} is not HOST:PORT/NAMESPACE",
            hint="e.g. 127.0.0.1:5000/mmaas or ghcr.io/my-org (lower case)",
        )
    return RegistryTarget(host, namespace)


def engine_tag(engine_hash: str) -> str:
    """The immutable tag of an engine hash: ``blake3:<hex>`` -> ``blake3-<first 16 hex>``.

    Raises:
        UsageError: ``engine_hash`` is not ``algo:<hex>``.
    """
    algo, _, hexdigest = engine_hash.partition(":")
    if not algo or not re.fullmatch(r"[0-9a-f]{16,}", hexdigest):
        raise UsageError(f"engine hash {engine_hash!r} is not algo:<hex>")
    return f"{algo}-{hexdigest[:ENGINE_TAG_HEX]}"


def push_image(
    image: str,
    target: RegistryTarget,
    name: str,
    version: str,
    *,
    credentials: Credentials | None,
    attempts: int = 3,
    backoff_s: float = 1.0,
) -> PushResult:
    """Tag the local ``image`` as ``REPOSITORY:version`` and ``REPOSITORY:blake3-<hex>``,
    push both and return what the registry stored.

    Args:
        image: a local image reference (tag or id) carrying ``io.mmaas.engine.blake3``.
        name, version: the model's name and version (version must be a valid tag).
        credentials: logged in with for this push only; None uses Docker's own config.
        attempts, backoff_s: tries per registry call; waits backoff_s, 2*backoff_s...

    Raises:
        UsageError: the image has no engine label, or name/version are not valid.
        DockerError: no Docker engine, or no such image.
        RegistryError: the registry refused the credentials, could not be reached after
            ``attempts`` tries, or refused the push.
    """
    engine = docker_engine.image_labels(image).get(ENGINE_LABEL)
    if not engine:
        raise UsageError(
            f"image {image} has no {ENGINE_LABEL} label", hint="push images built by `mmaas build`"
        )
    if not COMPONENT.match(name) or not _TAG.match(version):
        raise UsageError(f"{name}:{version} is not a valid image name and tag")
    repository = target.repository(name)
    tags = (version, engine_tag(engine))
    for tag in tags:
        docker_engine.run(["tag", image, f"{repository}:{tag}"], check=True)
    with logged_in(target.host, credentials, attempts, backoff_s) as config:
        digests = {
            retried(
                partial(_push_once, f"{repository}:{tag}", config), target.host, attempts, backoff_s
            )
            for tag in tags
        }
    if len(digests) != 1:
        raise RegistryError(
            f"{repository}: the tags {tags} were stored with different digests {sorted(digests)}"
        )
    return PushResult(repository, tags, digests.pop(), engine)


def _push_once(reference: str, config: Path | None) -> str:
    done = docker_engine.run(["push", reference], config=config)
    check_registry_call(done, f"docker push {reference}", reference.split("/")[0])
    found = _DIGEST.findall(done.stdout)
    if not found:
        raise RegistryError(f"docker push {reference} printed no digest:\n{done.stdout[-500:]}")
    return found[-1]
