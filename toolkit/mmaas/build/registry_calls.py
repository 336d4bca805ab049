"""Calls to a container registry: credentials, a private Docker config logged in for one
call, the classification of a failed ``docker login``/``push``/``pull`` and its retries.

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
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from mmaas.build import docker as docker_engine
from mmaas.core.errors import RegistryError, UsageError

LOG = logging.getLogger(__name__)
USER_ENV = "MMAAS_REGISTRY_USER"
PASSWORD_ENV = "MMAAS_REGISTRY_PASSWORD"
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
class Credentials:
    """A registry user name and password or token (the password never shows in repr)."""

    user: str
    password: str = field(repr=False)


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
