"""Pytest plug-in: the Docker engine, the local base image and throw-away containers.

Load it from tests/conftest.py with ``pytest_plugins = ["docker_fixtures"]``. The engine,
the BuildKit-capable client (``MMAAS_DOCKER``, Debian's ``/usr/bin/docker``) and the base
image are prepared by scripts/setup.sh, which the test command scripts/test.sh runs first.
Nothing here skips: a ``docker``-marked test whose engine, BuildKit or base image is missing
FAILS with the fix, because CI has all three (only ``gpu`` tests may be missing there).
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from mmaas.build import docker as docker_engine
from mmaas.core import proc
from mmaas.core.errors import DockerError, ProcessError

BASE_IMAGE = os.environ.get("MMAAS_BASE_IMAGE", "mmaas/base:bookworm")
SETUP_HINT = (
    "run scripts/setup.sh (as root: installs docker.io, starts dockerd, makes the base image)"
)
TEST_LABEL = "mmaas.test=1"
BUILDKIT_PROBE = b"FROM scratch\nLABEL mmaas.probe=buildkit\n"


@pytest.fixture(scope="session")
def docker_cli() -> list[str]:
    """argv prefix (``[client]``) of a Docker client that reaches the engine and builds with
    BuildKit when run with ``DOCKER_BUILDKIT=1`` (checked by a real one-line build).

    Fails (never skips) when there is none, naming scripts/setup.sh as the fix.
    """
    try:
        client = docker_engine.client()
    except DockerError as exc:
        pytest.fail(f"Docker engine not reachable: {exc}\n  fix: {SETUP_HINT}", pytrace=False)
    argv = client.argv()
    probe = proc.run(
        [*argv, "build", "--quiet", "-"],
        env={"DOCKER_BUILDKIT": "1"},
        input_bytes=BUILDKIT_PROBE,
        check=False,
    )
    if probe.returncode != 0:
        pytest.fail(
            f"{client.binary} cannot build with DOCKER_BUILDKIT=1: "
            f"{probe.stderr.strip()[-300:]}\n  fix: {SETUP_HINT} and use "
            "MMAAS_DOCKER=/usr/bin/docker",
            pytrace=False,
        )
    proc.run([*argv, "image", "rm", probe.stdout.strip()], check=False)
    return argv


@pytest.fixture(scope="session")
def base_image(docker_cli: list[str]) -> str:
    """Name of the local base image (``MMAAS_BASE_IMAGE``, default ``mmaas/base:bookworm``),
    asserted to exist in the engine; fails with the fix otherwise."""
    if proc.run([*docker_cli, "image", "inspect", BASE_IMAGE], check=False).returncode != 0:
        pytest.fail(f"base image {BASE_IMAGE} is missing\n  fix: {SETUP_HINT}", pytrace=False)
    return BASE_IMAGE


@pytest.fixture(autouse=True)
def _docker_marked_tests_need_the_engine(request: pytest.FixtureRequest) -> None:
    """Every ``@pytest.mark.docker`` test checks the engine first (fails, never skips)."""
    if request.node.get_closest_marker("docker") is not None:
        request.getfixturevalue("docker_cli")


@dataclass(frozen=True)
class Container:
    """A running container started by :func:`run_container`.

    Attributes:
        docker: argv prefix of the client.
        id: full container id.
        ports: container port -> host port on 127.0.0.1 (assigned free by the engine).
    """

    docker: list[str]
    id: str
    ports: dict[int, int]

    @property
    def port(self) -> int:
        """The host port of the first published container port."""
        return next(iter(self.ports.values()))

    def state(self) -> dict[str, object]:
        """``.State`` of ``docker inspect`` (Status, Running, ExitCode, Health...)."""
        done = proc.run([*self.docker, "inspect", "--format", "{{json .State}}", self.id])
        return dict(json.loads(done.stdout))

    def logs(self) -> str:
        """Everything the container wrote to stdout and stderr so far."""
        done = proc.run([*self.docker, "logs", self.id], check=False)
        return done.stdout + done.stderr

    def wait_exit(self, timeout: float) -> int:
        """Wait until the container stops; return its exit code. Fails after ``timeout`` s."""
        wait_for(
            lambda: not self.state()["Running"],
            timeout=timeout,
            what=f"container {self.id[:12]} to exit",
            container=self,
        )
        return int(self.state()["ExitCode"])  # type: ignore[call-overload]


@contextmanager
def run_container(
    docker: Sequence[str],
    image: str,
    *,
    env: Mapping[str, str] | None = None,
    ports: Sequence[int] = (),
    command: Sequence[str] = (),
    options: Sequence[str] = (),
) -> Iterator[Container]:
    """Start ``image`` detached, publish each of ``ports`` on a free 127.0.0.1 port, yield
    the :class:`Container`, and always remove it (``docker rm --force``) afterwards.

    Args:
        docker: argv prefix of the client (the ``docker_cli`` fixture).
        image: image id or tag.
        env: environment variables for the container.
        ports: container ports (TCP) to publish.
        command: replaces the image's CMD when given.
        options: more ``docker run`` options (``--ipc=host``, ``--user 0``...).

    Raises:
        ProcessError: ``docker run`` failed (e.g. no such image).
    """
    argv = [*docker, "run", "--detach", "--init", "--label", TEST_LABEL, *options]
    for port in ports:
        argv += ["--publish", f"127.0.0.1::{port}"]
    for key, value in (env or {}).items():
        argv += ["--env", f"{key}={value}"]
    container_id = proc.run([*argv, image, *command], what="docker run").stdout.strip()
    try:
        yield Container(
            list(docker),
            container_id,
            {port: _host_port(docker, container_id, port) for port in ports},
        )
    finally:
        proc.run([*docker, "rm", "--force", "--volumes", container_id], check=False)


def run_to_exit(
    docker: Sequence[str], image: str, *, env: Mapping[str, str] | None = None
) -> tuple[int, str]:
    """Run ``image`` (:func:`run_container`) until it exits by itself, as a start-up that
    must be refused does; return its exit code and everything it wrote. Fails after 60 s."""
    with run_container(docker, image, env=env) as container:
        code = container.wait_exit(timeout=60)
        return code, container.logs()


def _host_port(docker: Sequence[str], container_id: str, port: int) -> int:
    """The 127.0.0.1 port the engine published ``port``/tcp on (``docker port``)."""
    mapping = proc.run([*docker, "port", container_id, f"{port}/tcp"]).stdout.split()[0]
    return int(mapping.rsplit(":", 1)[1])


def wait_for(
    predicate: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    container: Container | None = None,
    interval: float = 0.2,
) -> float:
    """Poll ``predicate`` until it is true; return the seconds waited.

    Exceptions from ``predicate`` count as "not yet". Fails the test after ``timeout`` s,
    naming ``what`` and adding the tail of ``container``'s logs when given.
    """
    started = time.monotonic()
    while True:
        try:
            if predicate():
                return time.monotonic() - started
        except (OSError, ProcessError):
            pass
        if time.monotonic() - started > timeout:
            logs = f"\n  container logs:\n{container.logs()[-2000:]}" if container else ""
            pytest.fail(f"timed out after {timeout} s waiting for {what}{logs}", pytrace=False)
        time.sleep(interval)


def port_accepts(port: int, host: str = "127.0.0.1") -> bool:
    """True when a TCP connection to ``host:port`` succeeds and is not closed at once.

    docker-proxy accepts on a published port even while nothing listens inside the
    container, then closes; such a connection counts as not ready.
    """
    with socket.create_connection((host, port), timeout=1.0) as sock:
        sock.settimeout(0.3)
        try:
            return sock.recv(1, socket.MSG_PEEK) != b""
        except TimeoutError:
            return True


def wait_for_port(port: int, *, timeout: float, container: Container | None = None) -> float:
    """Wait until ``127.0.0.1:port`` accepts connections (see :func:`port_accepts`)."""
    return wait_for(
        lambda: port_accepts(port),
        timeout=timeout,
        what=f"127.0.0.1:{port} to accept connections",
        container=container,
    )


def grpc_serving(port: int) -> bool:
    """True when the ``grpc.health.v1`` service on ``127.0.0.1:port`` answers SERVING
    for the whole server (service ``""``)."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=1.0)
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def wait_for_grpc_serving(
    port: int, *, timeout: float, container: Container | None = None
) -> float:
    """Wait until the gRPC health service on ``port`` reports SERVING; return seconds waited.
    gRPC errors before then count as "not yet"."""

    def serving() -> bool:
        try:
            return grpc_serving(port)
        except grpc.RpcError:
            return False

    return wait_for(
        serving, timeout=timeout, what=f"gRPC health SERVING on port {port}", container=container
    )


def image_manifest(docker: Sequence[str], image: str) -> dict[str, object]:
    """The ``manifest.json`` inside ``image`` (``/opt/mmaas/model``), read with ``cat``."""
    argv = [*docker, "run", "--rm", "--entrypoint", "cat", image, "/opt/mmaas/model/manifest.json"]
    return dict(json.loads(proc.run(argv).stdout))


@contextmanager
def tampered_image(docker: Sequence[str], image: str, path: str, tag: str) -> Iterator[str]:
    """Build ``tag``: ``image`` with one byte appended to the file ``path`` inside it (as
    root, then back to the image's user 10001); yield the tag and always remove it."""
    with tempfile.TemporaryDirectory(prefix="mmaas-tamper-") as scratch:
        (Path(scratch) / "Dockerfile").write_text(
            f"FROM {image}\nUSER root\nRUN printf x >> {path}\nUSER 10001\n"
        )
        proc.run([*docker, "build", "--quiet", "--tag", tag, scratch], env={"DOCKER_BUILDKIT": "1"})
    try:
        yield tag
    finally:
        proc.run([*docker, "image", "rm", "--force", tag], check=False)
