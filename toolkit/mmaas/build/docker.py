"""The only module that talks to Docker (through the docker CLI, argv lists only).

Client choice: ``MMAAS_DOCKER`` when set, else the first of ``docker`` on PATH and
``/usr/bin/docker`` that reaches the engine, preferring one that can run BuildKit.
BuildKit is used when the client has the buildx plug-in or is older than 23.0 (its
built-in BuildKit, ``DOCKER_BUILDKIT=1``); otherwise the legacy builder
(``DOCKER_BUILDKIT=0``) runs the same Dockerfile rendered without cache mounts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import IO, Any, TypeVar

from mmaas.core import proc
from mmaas.core.errors import DockerError, ProcessError

START_HINT = (
    "start the engine (as root: `dockerd &`, or run scripts/setup.sh), or point "
    "MMAAS_DOCKER at a client that reaches one"
)
T = TypeVar("T")
_INSPECTED: ContextVar[dict[str, dict[str, Any]] | None] = ContextVar("inspected", default=None)
HOST_HINT = (
    "DOCKER_HOST={host} is set, so the client asks that engine, not the local socket: "
    "start the engine there, correct DOCKER_HOST, or unset it to use the local one"
)


@dataclass(frozen=True)
class DockerClient:
    """A docker CLI that reaches an engine.

    Attributes:
        binary: path of the client executable.
        buildkit: True when ``DOCKER_BUILDKIT=1`` builds work with it.
        server_version: the engine's version string.
    """

    binary: str
    buildkit: bool
    server_version: str

    def argv(self, *args: str) -> list[str]:
        """``[binary, *args]``."""
        return [self.binary, *args]

    @property
    def build_env(self) -> dict[str, str]:
        """Environment for ``docker build``: selects BuildKit or the legacy builder."""
        return {"DOCKER_BUILDKIT": "1" if self.buildkit else "0"}


@cache
def client() -> DockerClient:
    """The Docker client to use (cached for the process).

    Raises:
        DockerError: no candidate client reaches a Docker engine (says how to start one).
    """
    candidates = (
        [os.environ["MMAAS_DOCKER"]]
        if os.environ.get("MMAAS_DOCKER")
        else [path for path in (shutil.which("docker"), "/usr/bin/docker") if path]
    )
    reachable: list[DockerClient] = []
    problems = []
    for binary in dict.fromkeys(candidates):
        try:
            versions = json.loads(
                proc.run(
                    [binary, "version", "--format", "{{json .}}"], what="docker version"
                ).stdout
            )
        except ProcessError as exc:
            problems.append(f"{binary}: {docker_error_line(exc)}")
            continue
        except ValueError as exc:
            problems.append(f"{binary}: unreadable `docker version` output ({exc})")
            continue
        found = DockerClient(
            binary,
            _has_buildkit(binary, versions),
            versions.get("Server", {}).get("Version", "unknown"),
        )
        if found.buildkit:
            return found
        reachable.append(found)
    if reachable:
        return reachable[0]
    host = os.environ.get("DOCKER_HOST")
    raise DockerError(
        "cannot reach a Docker engine"
        + (f" at DOCKER_HOST={host}" if host else "")
        + "\n"
        + "\n".join(f"  {line}" for line in problems or ["no docker client found"]),
        hint=HOST_HINT.format(host=host) if host else START_HINT,
    )


def docker_error_line(exc: ProcessError) -> str:
    """Docker's own error line from a failed client run (``Cannot connect to the Docker
    daemon at unix:///var/run/docker.sock. Is the docker daemon running?``): the last
    line of its output that is not the JSON it printed first, else mmaas's message."""
    lines = [line.strip() for line in exc.output_tail.splitlines() if line.strip()]
    own = [line for line in lines if not line.startswith("{")]
    return own[-1] if own else exc.message


def _has_buildkit(binary: str, versions: Mapping[str, Any]) -> bool:
    if proc.run([binary, "buildx", "version"], check=False).returncode == 0:
        return True
    client_version = str((versions.get("Client") or {}).get("Version", "0"))
    return int(client_version.split(".")[0] or 0) < 23


def run(
    args: Sequence[str],
    *,
    config: Path | None = None,
    input_bytes: bytes | None = None,
    check: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run the chosen client with ``args`` and capture its output. ``config`` selects a
    Docker config directory (``docker --config DIR``, e.g. a throw-away login);
    ``input_bytes`` go to stdin (``login --password-stdin``: never a password on argv).

    Raises:
        ProcessError: ``check`` is set and the client exits non-zero.
    """
    prefix = ["--config", str(config)] if config is not None else []
    return proc.run(
        client().argv(*prefix, *args),
        input_bytes=input_bytes,
        check=check,
        what=f"docker {args[0]}",
    )


def build(
    context: Path,
    dockerfile: Path,
    tag: str,
    *,
    labels: Mapping[str, str] | None = None,
    target: str | None = None,
    echo: bool = True,
) -> str:
    """``docker build`` the staged ``context``; stream progress to stderr; return the
    image id (``sha256:<hex>``).

    Raises:
        DockerError: the build failed; carries the tail of the build output.
    """
    docker = client()
    with tempfile.TemporaryDirectory(prefix="mmaas-iid-") as scratch:
        iidfile = Path(scratch) / "iid"
        argv = docker.argv(
            "build",
            *build_args(dockerfile, tag, labels or {}, target, docker.buildkit),
            "--iidfile",
            str(iidfile),
            str(context),
        )
        try:
            proc.stream(argv, env=docker.build_env, echo=echo, what="docker build")
        except ProcessError as exc:
            raise DockerError(
                f"docker build of {tag} failed (exit {exc.returncode})\n"
                f"  last output:\n"
                + "\n".join("    " + line for line in exc.output_tail.splitlines())
            ) from exc
        return iidfile.read_text().strip()


def build_args(
    dockerfile: Path, tag: str, labels: Mapping[str, str], target: str | None, buildkit: bool
) -> list[str]:
    """The ``docker build`` arguments (without the client and context), for display too."""
    args = ["--file", str(dockerfile), "--tag", tag]
    if buildkit:
        args += ["--progress", "plain"]
    for name, value in labels.items():
        args += ["--label", f"{name}={value}"]
    if target:
        args += ["--target", target]
    return args


def add_labels(
    base: str, tag: str, labels: Mapping[str, str], files: Mapping[str, str] | None = None
) -> str:
    """Build ``tag`` as the image ``base`` plus ``labels`` (a metadata-only build) and
    ``files`` (absolute path in the image -> text, one small layer, owned by root, mode
    0644); return the new image id. Takes a tag, not an id: BuildKit resolves ``FROM
    sha256:...`` on Docker Hub, but a local tag from the local image store."""
    with tempfile.TemporaryDirectory(prefix="mmaas-label-") as scratch:
        lines = [f"FROM {base}"]
        for index, (path, text) in enumerate(sorted((files or {}).items())):
            (Path(scratch) / f"file-{index}").write_text(text)
            lines.append(f"COPY file-{index} {path}")
        dockerfile = Path(scratch) / "Dockerfile"
        dockerfile.write_text("\n".join(lines) + "\n")
        return build(Path(scratch), dockerfile, tag, labels=labels, echo=False)


def inspect_image(image: str) -> dict[str, Any]:
    """``docker image inspect`` of one image as a dict (within :func:`inspections_once`,
    asked once per name).

    Raises:
        DockerError: no such image.
    """
    memo = _INSPECTED.get()
    if memo is not None and image in memo:
        return memo[image]
    result = run(["image", "inspect", image])
    if result.returncode != 0:
        raise DockerError(
            f"no image {image!r} in the local Docker engine",
            hint="build it with `mmaas build` or pull it first",
        )
    data: list[dict[str, Any]] = json.loads(result.stdout)
    if memo is not None:
        memo[image] = data[0]
    return data[0]


@contextmanager
def inspections_once(prefetch: Sequence[str] = ()) -> Iterator[None]:
    """Within the block, :func:`inspect_image` runs ``docker image inspect`` once per name
    (each run costs a docker CLI process, 0.1-0.3 s on a loaded host): for a build's checks
    before any Docker build, which read the same base image for the engine key and the
    build digest. The ``prefetch`` names are inspected in one run when all of them exist
    (``docker image inspect`` answers in the order asked; when one is missing, each is
    asked alone later, so that one raises as usual)."""
    memo: dict[str, dict[str, Any]] = {}
    names = list(dict.fromkeys(prefetch))
    if names:
        result = run(["image", "inspect", *names])
        found = json.loads(result.stdout or "[]") if result.returncode == 0 else []
        if len(found) == len(names):
            memo.update(zip(names, found, strict=True))
    token = _INSPECTED.set(memo)
    try:
        yield
    finally:
        _INSPECTED.reset(token)


def image_labels(image: str) -> dict[str, str]:
    """The labels of a local image (empty dict when it has none)."""
    return dict((inspect_image(image).get("Config") or {}).get("Labels") or {})


def copy_from_image(image: str, source: str, dest: Path) -> Path:
    """Copy the directory ``source`` out of the LOCAL ``image`` (without running it) to
    ``dest``. The image is looked up first: a mistyped name is an error, never a pull.

    Raises:
        DockerError: no such local image, or ``source`` is not in it (not an mmaas image).
    """
    with created(image) as container:
        if run(["cp", f"{container}:{source}", str(dest)]).returncode != 0:
            raise DockerError(f"{image} has no {source}: not an image built by mmaas")
    return dest


@contextmanager
def created(image: str) -> Iterator[str]:
    """The id of a container created (never started) from the LOCAL ``image`` (else
    DockerError), removed after the block."""
    inspect_image(image)
    container = run(["create", image], check=True).stdout.strip()
    try:
        yield container
    finally:
        run(["rm", "--force", container])


def stream_path(container: str, path: str, consume: Callable[[IO[bytes]], T]) -> T | None:
    """Hand ``path`` of ``container``, as the tar stream ``docker cp`` writes (a directory
    whole, a link as a link), to ``consume``; its result, None when there is no ``path``
    (DockerError when docker cp fails otherwise)."""
    argv = client().argv("cp", f"{container}:{path}", "-")
    result, code, errors = proc.read_output(argv, consume)
    missing = any(words in errors for words in ("Could not find the file", "No such container:"))
    if code != 0 and not missing:
        raise DockerError(f"docker cp {path} out of {container[:12]} failed: {errors.strip()}")
    return result if code == 0 else None
