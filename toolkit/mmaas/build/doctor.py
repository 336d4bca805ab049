"""What this host can build: ``mmaas doctor``.

Each check asks the real thing. Doctor checks Docker itself (the engine through
:mod:`mmaas.build.docker`, BuildKit, ``docker info``) and then asks every back end of
the registry (:data:`mmaas.backends.BACKENDS`) through its build target's
:meth:`~mmaas.backends.targets.BuildTarget.readiness` for its own checks (its runtime library;
GPUs and the NVIDIA container runtime) and whether its images build here, so it knows no
back end by name. A back end whose build target cannot even be imported (a missing
package) is reported not usable, with the import error.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from mmaas.backends import BACKENDS, get_target
from mmaas.backends.targets import DockerHost, HostCheck, Readiness
from mmaas.core import proc
from mmaas.core.errors import DockerError, ProcessError


@dataclass(frozen=True)
class BackendStatus:
    """Whether images of back end ``name`` can be built here, and why (not)."""

    name: str
    usable: bool
    reason: str


@dataclass(frozen=True)
class DoctorReport:
    """All checks (Docker's, then each back end's, each name once), then one status per
    back end."""

    checks: tuple[HostCheck, ...]
    backends: tuple[BackendStatus, ...]

    @property
    def usable(self) -> bool:
        """True when at least one back end can build images here (else doctor exits 1)."""
        return any(status.usable for status in self.backends)

    def to_dict(self) -> dict:
        """JSON-ready form (``mmaas doctor --json``)."""
        return {**asdict(self), "usable": self.usable}


def diagnose() -> DoctorReport:
    """Run every check on this host (a few subprocesses; no image pulls)."""
    host = docker_host()
    checks = {check.name: check for check in (host.docker, host.buildkit)}
    statuses = []
    for name in BACKENDS:
        ready = _readiness(name, host)
        for check in ready.checks:
            checks.setdefault(check.name, check)
        statuses.append(BackendStatus(name, ready.usable, ready.reason))
    return DoctorReport(tuple(checks.values()), tuple(statuses))


def render_text(report: DoctorReport) -> str:
    """Human-readable report: one line per check, then the back ends."""
    lines = [f"[{'ok' if c.ok else '--'}] {c.name}: {c.detail}" for c in report.checks]
    lines += [
        f"backend {b.name}: {'usable' if b.usable else 'NOT usable'} ({b.reason})"
        for b in report.backends
    ]
    return "\n".join(lines) + "\n"


def docker_host() -> DockerHost:
    """The ``docker`` and ``buildkit`` checks and ``docker info`` (``{}`` without an
    engine). Docker's own error line stays in the ``docker`` check's detail."""
    from mmaas.build import docker as docker_engine

    try:
        client = docker_engine.client()
    except DockerError as exc:
        return DockerHost(
            HostCheck("docker", False, str(exc)),
            HostCheck("buildkit", False, "no Docker engine to ask"),
            {},
        )
    try:
        info = json.loads(
            proc.run(client.argv("info", "--format", "{{json .}}"), what="docker info").stdout
        )
    except (ProcessError, ValueError):
        info = {}
    buildkit = HostCheck(
        "buildkit",
        client.buildkit,
        "docker build can use BuildKit (cache mounts)"
        if client.buildkit
        else "no BuildKit: the legacy builder runs Dockerfiles without cache mounts",
    )
    docker = HostCheck("docker", True, f"engine {client.server_version} via {client.binary}")
    return DockerHost(docker, buildkit, info)


def _readiness(name: str, host: DockerHost) -> Readiness:
    try:
        return get_target(name).readiness(host)
    except ImportError as exc:
        return Readiness((), False, f"its build target does not load ({exc})")
