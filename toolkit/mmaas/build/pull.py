"""Images named by digest: the reference grammar (``NAME@sha256:<hex>``) and ``docker pull``
of such a reference with the registry credentials of :mod:`mmaas.build.registry_calls`.

A digest names content, a tag only a pointer that can move: what CI built, verified and
signed is the digest ``mmaas push`` printed, and that is what ``mmaas verify --pull`` and
``mmaas export --image`` take.
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path

from mmaas.build import docker as docker_engine
from mmaas.build.registry import COMPONENT
from mmaas.build.registry_calls import Credentials, check_registry_call, logged_in, retried
from mmaas.core.errors import UsageError

_PINNED = re.compile(
    r"^(?P<name>[^@\s]+?)(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?"
    r"@(?P<digest>sha256:[0-9a-f]{64})$"
)


def pinned_reference(text: str, what: str = "--image") -> str:
    """``text`` checked to be an image reference pinned by digest,
    ``[HOST[:PORT]/]NAME[:TAG]@sha256:<64 hex>`` (distribution/reference's canonical
    form; the tag, if any, is dropped: the digest alone names the content). Returns
    ``NAME@sha256:<hex>``.

    Raises:
        UsageError: no ``@sha256:`` digest (a tag can move; what was verified and signed
            is the digest ``mmaas push`` printed), or a malformed name.
    """
    found = _PINNED.match(text.strip())
    if found is None:
        raise UsageError(
            f"{what} {text!r} is not pinned by a digest (NAME@sha256:<64 hex>)",
            hint="use the reference `mmaas push` or `mmaas build --push` printed, "
            "e.g. 127.0.0.1:5000/mmaas/ppocr-det@sha256:...",
        )
    host, _, path = found["name"].rpartition("/")
    components = path.split("/") if not host else [*host.split("/")[1:], path]
    if not all(COMPONENT.match(part) for part in components if part):
        raise UsageError(f"{what} {text!r}: {found['name']!r} is not a valid image name")
    return f"{found['name']}@{found['digest']}"


def pull_image(
    reference: str,
    *,
    credentials: Credentials | None,
    attempts: int = 3,
    backoff_s: float = 1.0,
) -> str:
    """``docker pull`` the digest-pinned ``reference`` (:func:`pinned_reference`) into the
    local engine and return it. A pull by digest is content-addressed: the engine checks
    the manifest and every layer against the digest, so what arrives is what was pushed.

    Raises:
        UsageError: no digest in ``reference``. RegistryError: refused credentials, no
            such image or digest, or the registry unreachable after ``attempts`` tries.
    """
    pinned = pinned_reference(reference, "image")
    host = pinned.split("/")[0]

    def pull_once(config: Path | None) -> str:
        done = docker_engine.run(["pull", pinned], config=config)
        check_registry_call(done, f"docker pull {pinned}", host)
        return pinned

    with logged_in(host, credentials, attempts, backoff_s) as config:
        return retried(partial(pull_once, config), host, attempts, backoff_s)
