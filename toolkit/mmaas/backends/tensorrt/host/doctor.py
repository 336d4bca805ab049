"""What ``mmaas doctor`` checks of this host for TensorRT builds (the GPU part of doctor):
GPUs and driver (``nvidia-smi``), the NVIDIA container runtime (``docker info``: the
``nvidia`` runtime, or CDI specs under ``/etc/cdi`` or ``/var/run/cdi``), and TensorRT
on the host (the tensorrt module or trtexec; builds use the builder image's). Images
build when Docker, a GPU and the NVIDIA runtime are there: the compile runs in
``docker run --gpus all``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mmaas.backends.targets import DockerHost, HostCheck, Readiness
from mmaas.backends.tensorrt.runtime.gpu import query_gpus

CDI_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))


def tensorrt_readiness(host: DockerHost) -> Readiness:
    """The checks above and the verdict (the missing ones, each as ``name: detail``)."""
    gpus, nvidia = gpu_check(), nvidia_runtime_check(host.info)
    missing = [c.summary for c in (host.docker, gpus, nvidia) if not c.ok]
    reason = "; ".join(missing) or (
        "GPU, NVIDIA container runtime and Docker engine "
        "(engines compile in `docker run --gpus all`)"
    )
    return Readiness((gpus, nvidia, _tensorrt_check()), not missing, reason)


def gpu_check() -> HostCheck:
    """``gpus``: every visible GPU with its compute capability, the driver and its CUDA."""
    report = query_gpus()
    if not report.gpus:
        return HostCheck("gpus", False, report.problem or "no GPU")
    listed = "; ".join(f"{g.name} (sm{g.compute_capability.replace('.', '')})" for g in report.gpus)
    return HostCheck(
        "gpus",
        True,
        f"{listed}; driver {report.gpus[0].driver_version}, supports CUDA {report.driver_cuda}",
    )


def nvidia_runtime_check(info: Mapping[str, Any]) -> HostCheck:
    """``nvidia-container-runtime``: Docker's ``nvidia`` runtime or NVIDIA CDI specs."""
    runtimes = sorted((info.get("Runtimes") or {}).keys())
    cdi = [str(p) for d in CDI_DIRS if d.is_dir() for p in d.glob("*nvidia*")]
    name = "nvidia-container-runtime"
    if "nvidia" in runtimes or cdi:
        where = "nvidia runtime" if "nvidia" in runtimes else f"CDI specs {', '.join(cdi)}"
        return HostCheck(
            name, True, f"{where} (default runtime: {info.get('DefaultRuntime', '?')})"
        )
    seen = ", ".join(runtimes) if runtimes else "unknown (no engine)"
    return HostCheck(name, False, f"not configured; Docker runtimes: {seen}")


def _tensorrt_check() -> HostCheck:
    from mmaas.backends.tensorrt.runtime import tensorrt_version

    version = tensorrt_version()
    if version is None:
        return HostCheck(
            "tensorrt",
            False,
            "no tensorrt module or trtexec on this host (builds use trtexec inside the "
            "TensorRT builder image)",
        )
    return HostCheck("tensorrt", True, f"TensorRT {version} on this host")
