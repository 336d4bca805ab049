"""What this host can build: ``mmaas doctor``.

Each check asks the real thing: the Docker engine and BuildKit (through
:mod:`mmaas.build.docker`), the NVIDIA container runtime (``docker info``: the
``nvidia`` runtime, or CDI specs under ``/etc/cdi`` or ``/var/run/cdi``), GPUs and driver
(``nvidia-smi``), TensorRT on the host (the tensorrt module or trtexec), and ONNX Runtime.
A back end is usable when everything its image build needs is here; otherwise the report
says what is missing.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from mmaas.backends.tensorrt.gpu import query_gpus
from mmaas.core import proc
from mmaas.core.errors import DockerError, ProcessError

CDI_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))


@dataclass(frozen=True)
class Check:
    """One finding: ``name``, whether it is ``ok``, and the ``detail`` that says why."""

    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class BackendStatus:
    """Whether images of back end ``name`` can be built here, and why (not)."""

    name: str
    usable: bool
    reason: str


@dataclass(frozen=True)
class DoctorReport:
    """All checks, then one status per back end."""

    checks: tuple[Check, ...]
    backends: tuple[BackendStatus, ...]

    def to_dict(self) -> dict:
        """JSON-ready form (``mmaas doctor --json``)."""
        return asdict(self)


def diagnose() -> DoctorReport:
    """Run every check on this host (a few subprocesses; no image pulls)."""
    docker, buildkit, info = _docker()
    nvidia = _nvidia_runtime(info)
    gpus = _gpus()
    checks = (docker, buildkit, gpus, nvidia, _tensorrt(), _onnxruntime())
    return DoctorReport(
        checks, (_onnxruntime_status(docker, checks[-1]), _tensorrt_status(docker, gpus, nvidia))
    )


def render_text(report: DoctorReport) -> str:
    """Human-readable report: one line per check, then the back ends."""
    lines = [f"[{'ok' if c.ok else '--'}] {c.name}: {c.detail}" for c in report.checks]
    lines += [
        f"backend {b.name}: {'usable' if b.usable else 'NOT usable'} ({b.reason})"
        for b in report.backends
    ]
    return "\n".join(lines) + "\n"


def _docker() -> tuple[Check, Check, dict]:
    from mmaas.build import docker as docker_engine

    try:
        client = docker_engine.client()
    except DockerError as exc:
        return (
            Check("docker", False, exc.message),
            Check("buildkit", False, "no Docker engine to ask"),
            {},
        )
    try:
        info = json.loads(
            proc.run(client.argv("info", "--format", "{{json .}}"), what="docker info").stdout
        )
    except (ProcessError, ValueError):
        info = {}
    buildkit = Check(
        "buildkit",
        client.buildkit,
        "docker build can use BuildKit (cache mounts)"
        if client.buildkit
        else "no BuildKit: the legacy builder runs Dockerfiles without cache mounts",
    )
    return (
        Check("docker", True, f"engine {client.server_version} via {client.binary}"),
        buildkit,
        info,
    )


def _nvidia_runtime(info: dict) -> Check:
    runtimes = sorted((info.get("Runtimes") or {}).keys())
    cdi = [str(p) for d in CDI_DIRS if d.is_dir() for p in d.glob("*nvidia*")]
    if "nvidia" in runtimes or cdi:
        where = "nvidia runtime" if "nvidia" in runtimes else f"CDI specs {', '.join(cdi)}"
        return Check(
            "nvidia-container-runtime",
            True,
            f"{where} (default runtime: {info.get('DefaultRuntime', '?')})",
        )
    seen = ", ".join(runtimes) if runtimes else "unknown (no engine)"
    return Check("nvidia-container-runtime", False, f"not configured; Docker runtimes: {seen}")


def _gpus() -> Check:
    report = query_gpus()
    if not report.gpus:
        return Check("gpus", False, report.problem or "no GPU")
    listed = "; ".join(f"{g.name} (sm{g.compute_capability.replace('.', '')})" for g in report.gpus)
    return Check(
        "gpus",
        True,
        f"{listed}; driver {report.gpus[0].driver_version}, supports CUDA {report.driver_cuda}",
    )


def _tensorrt() -> Check:
    from mmaas.backends.tensorrt.runtime import tensorrt_version

    version = tensorrt_version()
    if version is None:
        return Check(
            "tensorrt",
            False,
            "no tensorrt module or trtexec on this host (builds "
            "use trtexec inside the TensorRT builder image)",
        )
    return Check("tensorrt", True, f"TensorRT {version} on this host")


def _onnxruntime() -> Check:
    try:
        import onnxruntime
    except ImportError as exc:
        return Check("onnxruntime", False, f"not importable ({exc})")
    return Check("onnxruntime", True, f"ONNX Runtime {onnxruntime.__version__} (CPU)")


def _onnxruntime_status(docker: Check, runtime: Check) -> BackendStatus:
    missing = [c.detail for c in (docker, runtime) if not c.ok]
    return BackendStatus(
        "onnxruntime",
        not missing,
        "; ".join(missing) if missing else "Docker engine and ONNX Runtime",
    )


def _tensorrt_status(docker: Check, gpus: Check, nvidia: Check) -> BackendStatus:
    missing = [f"{c.name}: {c.detail}" for c in (docker, gpus, nvidia) if not c.ok]
    if missing:
        return BackendStatus("tensorrt", False, "; ".join(missing))
    return BackendStatus(
        "tensorrt",
        True,
        "GPU, NVIDIA container runtime and Docker engine "
        "(engines compile in `docker run --gpus all`)",
    )
