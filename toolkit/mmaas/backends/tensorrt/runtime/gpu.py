"""NVIDIA GPU facts from ``nvidia-smi`` (through :mod:`mmaas.core.proc`), for the TensorRT back
end, ``mmaas doctor`` and the builder stage's GPU check (case C11).

``nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader`` prints one
``NVIDIA A10, 8.6, 550.54.15`` line per GPU (``compute_cap`` needs driver 510 or newer);
its banner's ``CUDA Version: 12.4`` is the newest CUDA the driver supports.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass

from mmaas.core import proc
from mmaas.core.errors import ProcessError

QUERY = ["nvidia-smi", "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"]
DRIVER_CUDA = re.compile(r"CUDA Version:\s*([\d.]+)")
# The ways a GPU reaches an engine build that work in practice (C11).
GPU_ROUTES = (
    "run the builder image with `docker run --gpus all` (what `mmaas build` does "
    "for TensorRT: needs the NVIDIA Container Toolkit)",
    'the legacy builder (DOCKER_BUILDKIT=0) with "default-runtime": "nvidia" in '
    "/etc/docker/daemon.json",
    "BuildKit with CDI devices (`RUN --device=nvidia.com/gpu=all`, dockerfile 1.14+)",
)


@dataclass(frozen=True)
class Gpu:
    """One visible GPU: ``name``, ``compute_capability`` (``"8.6"``), ``driver_version``."""

    name: str
    compute_capability: str
    driver_version: str


@dataclass(frozen=True)
class GpuReport:
    """What ``nvidia-smi`` says: the GPUs, the driver's newest CUDA (``"12.4"``), and why
    there are none (``problem``) when the list is empty."""

    gpus: tuple[Gpu, ...]
    driver_cuda: str | None
    problem: str | None


def query_gpus() -> GpuReport:
    """Ask ``nvidia-smi`` for the GPUs of this host (or container). Never raises: a
    missing tool or a failing driver is reported in ``problem``."""
    if shutil.which("nvidia-smi") is None:
        return GpuReport(
            (),
            None,
            "nvidia-smi not found: no NVIDIA driver on this host (or "
            "the container was started without GPU access)",
        )
    try:
        listing = proc.run(QUERY, what="nvidia-smi --query-gpu")
        banner = proc.run(["nvidia-smi"], check=False, what="nvidia-smi").stdout
    except ProcessError as exc:
        return GpuReport((), None, f"nvidia-smi failed: {exc.output_tail or exc.message}")
    gpus = tuple(_gpu(line) for line in listing.stdout.splitlines() if line.strip())
    found = DRIVER_CUDA.search(banner)
    return GpuReport(
        gpus, found.group(1) if found else None, None if gpus else "nvidia-smi lists no GPU"
    )


def no_gpu_message(problem: str) -> str:
    """The C11 message: no GPU, and the routes that give a build one."""
    routes = "; ".join(f"({n}) {r}" for n, r in enumerate(GPU_ROUTES, 1))
    return (
        f"no NVIDIA GPU is visible here ({problem}); TensorRT needs one to build an "
        f"engine. Routes that work: {routes}"
    )


def _gpu(line: str) -> Gpu:
    name, capability, driver = (part.strip() for part in line.rsplit(",", 2))
    return Gpu(name, capability, driver)
