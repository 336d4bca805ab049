"""Push a built image to a container registry and return the digest the registry stored.

Each image is pushed as ``HOST/NAMESPACE/NAME:VERSION`` and under an immutable tag derived
from its engine hash (label ``io.mmaas.engine.blake3``): ``blake3-<first 16 hex>``.
Credentials come from ``MMAAS_REGISTRY_USER`` / ``MMAAS_REGISTRY_PASSWORD`` (handed to
``docker login --password-stdin`` inside a private, temporary Docker config directory that
is deleted afterwards: never on a command line, in a log or in an image), else from
Docker's own config (``docker login`` done beforehand). Transient failures (connection
refused or reset, timeouts, HTTP 5xx) are retried with exponential backoff; refused
credentials are not.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from mmaas.build import docker as docker_engine
from mmaas.core.errors import RegistryError, UsageError

LOG = logging.getLogger(__name__)
USER_ENV = "MMAAS_REGISTRY_USER"
PASSWORD_ENV = "MMAAS_REGISTRY_PASSWORD"
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
_AUTH_WORDS = (
    "unauthorized",
    "authentication required",
    "denied",
    "incorrect username or password",
    "status: 401",
    "status: 403",
)
_TRANSIENT_WORDS = (
    "connection refused",
    "connection reset",
    "timeout",
    "timed out",
    "unexpected eof",
    "status: 5",
    "503 service",
    "502 bad",
    "504 gateway",
    "500 internal",
    "temporarily unavailable",
    "tls handshake",
)


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
class Credentials:
    """A registry user name and password or token (the password never shows in repr)."""

    user: str
    password: str = field(repr=False)


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


def credentials_from_env(env: Mapping[str, str] = os.environ) -> Credentials | None:
    """Credentials from ``MMAAS_REGISTRY_USER`` and ``MMAAS_REGISTRY_PASSWORD``; None when
    the password is unset or empty (Docker's own config is used then, whatever the user).

    Raises:
        UsageError: a password is set without a user.
    """
    user, password = env.get(USER_ENV, ""), env.get(PASSWORD_ENV, "")
    if password and not user:
        raise UsageError(f"{PASSWORD_ENV} is set but {USER_ENV} is not; set both")
    return Credentials(user, password) if password else None


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


@contextmanager
def logged_in(
    host: str, credentials: Credentials | None, attempts: int, backoff_s: float
) -> Iterator[Path | None]:
    """Yield a temporary Docker config directory logged in to ``host`` (deleted on exit),
    or None (Docker's own config) without credentials."""
    if credentials is None:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="mmaas-docker-config-") as scratch:
        config = Path(scratch)

        def login() -> str:
            done = docker_engine.run(
                ["login", "--username", credentials.user, "--password-stdin", host],
                config=config,
                input_bytes=credentials.password.encode(),
            )
            check_registry_call(done, f"docker login {host}", host)
            return ""

        retried(login, host, attempts, backoff_s)
        yield config


def _push_once(reference: str, config: Path | None) -> str:
    done = docker_engine.run(["push", reference], config=config)
    check_registry_call(done, f"docker push {reference}", reference.split("/")[0])
    found = _DIGEST.findall(done.stdout)
    if not found:
        raise RegistryError(f"docker push {reference} printed no digest:\n{done.stdout[-500:]}")
    return found[-1]


class _TransientError(RegistryError):
    """A registry failure worth retrying."""


def check_registry_call(done: subprocess.CompletedProcess[str], what: str, host: str) -> None:
    """Turn a failed docker login/push/pull into the right error.

    Raises:
        RegistryError: the registry refused the credentials (says which variables to set),
            or another failure; a subclass for transient ones that :func:`retried` retries.
    """
    if done.returncode == 0:
        return
    output = (done.stdout + done.stderr).strip()
    last = output.splitlines()[-1] if output else f"exit code {done.returncode}"
    lowered = output.lower()
    if any(word in lowered for word in _AUTH_WORDS):
        raise RegistryError(
            f"{what}: registry {host} refused the credentials ({last})",
            hint=f"set {USER_ENV} and {PASSWORD_ENV}, or `docker login {host}`",
        )
    if any(word in lowered for word in _TRANSIENT_WORDS):
        raise _TransientError(
            f"{what}: registry {host} cannot be reached ({last})",
            hint="is the registry running and the address right?",
        )
    raise RegistryError(f"{what} failed: {last}")


def retried(call: Callable[[], str], host: str, attempts: int, backoff_s: float) -> str:
    """Run ``call`` up to ``attempts`` times; after a transient failure (registry down,
    timeout, 5xx) wait ``backoff_s * 2**n`` seconds and try again.

    Raises:
        RegistryError: the last failure, naming ``host`` and the number of attempts.
    """
    attempt = 1
    while True:
        try:
            return call()
        except _TransientError as exc:
            if attempt >= attempts:
                raise RegistryError(
                    f"{exc.message} after {attempts} attempt(s)", hint=exc.hint
                ) from exc
            delay = backoff_s * 2 ** (attempt - 1)
            LOG.warning("%s; retrying in %.1f s", exc.message, delay)
            time.sleep(delay)
            attempt += 1
