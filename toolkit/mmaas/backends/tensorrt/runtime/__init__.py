"""TensorRT (NVIDIA GPUs): the runtime part of the back end, what the image (and the builder
stage's checks of an engine) runs.

load: :class:`~mmaas.backends.tensorrt.runtime.engine.TensorRTEngine` (TensorRT Python API +
cuda-python, imported only there). describe / check_compatible: GPU name, compute
capability, driver, CUDA and TensorRT versions; an engine is refused on another compute
capability or TensorRT version unless built with hardware / version compatibility, and on
a driver older than its CUDA needs (:mod:`mmaas.backends.tensorrt.runtime.compat`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from mmaas.backends.tensorrt.runtime.compat import check_host
from mmaas.backends.tensorrt.runtime.gpu import query_gpus
from mmaas.backends.tensorrt.runtime.releases import banner_version, min_driver
from mmaas.core import proc
from mmaas.core.manifest import Manifest

TRTEXEC_PATHS = ("/usr/src/tensorrt/bin/trtexec", "/usr/bin/trtexec")


class TensorRTRuntime:
    """The runtime part of the GPU back end; see the module docstring."""

    name = "tensorrt"
    platform = "tensorrt_plan"
    device_kind = "GPU"

    def load(self, directory: Path, manifest: Manifest, threads: int = 0) -> Any:
        """Deserialize ``directory/model.plan`` (``threads`` is unused: the GPU runs it)."""
        from mmaas.backends.tensorrt.runtime.engine import TensorRTEngine

        return TensorRTEngine(directory / manifest.engine.path, manifest.model)

    def describe(self) -> dict[str, Any]:
        """``{"name", "version" (TensorRT), "gpu": {"name", "compute_capability"} | None,
        "driver_version", "driver_cuda", "cuda_version" (runtime), "min_driver",
        "problem"}``, from nvidia-smi, the tensorrt module (or trtexec's banner) and
        ``CUDA_VERSION`` (set by NVIDIA's images)."""
        report = query_gpus()
        first = report.gpus[0] if report.gpus else None
        cuda = os.environ.get("CUDA_VERSION")
        return {
            "name": self.name,
            "version": tensorrt_version(),
            "gpu": {"name": first.name, "compute_capability": first.compute_capability}
            if first
            else None,
            "driver_version": first.driver_version if first else None,
            "driver_cuda": report.driver_cuda,
            "cuda_version": cuda,
            "min_driver": min_driver(cuda) if cuda else None,
            "problem": report.problem,
        }

    def check_compatible(self, manifest: Manifest) -> None:
        """Refuse to serve an engine this host cannot run, before readiness.

        Raises:
            CompatibilityError: "built for X, running on Y": no GPU, another compute
                capability (unless built ``ampere+`` and this GPU is sm80+), another
                TensorRT version (unless version compatible and this one is newer), or a
                driver older than the engine's CUDA needs.
        """
        portability = manifest.report.get("compile", {}).get("portability", {})
        check_host(manifest.backend, self.describe(), portability)


def trtexec() -> str:
    """The trtexec binary: on PATH, else where NVIDIA's images put it."""
    return shutil.which("trtexec") or next(
        (p for p in TRTEXEC_PATHS if Path(p).is_file()), "trtexec"
    )


def tensorrt_version() -> str | None:
    """This stage's TensorRT version (``"10.13.2"``): the tensorrt module's, else the one
    trtexec's banner names; None without either."""
    try:
        import tensorrt

        return str(tensorrt.__version__)
    except ImportError:
        if shutil.which(trtexec()) is None:
            return None
        done = proc.run([trtexec(), "--help"], check=False, what="trtexec --help")
        return banner_version(done.stdout + done.stderr)
