"""Whether this host can run a TensorRT engine, from the facts the manifest recorded at
build time (``Backend.describe`` then) and now (C9, C10, C12). Every refusal reads
"built for X, running on Y"."""

from __future__ import annotations

from typing import Any

from mmaas.backends.tensorrt.runtime.releases import parse_version
from mmaas.core.errors import CompatibilityError


def check_host(built: dict[str, Any], here: dict[str, Any], portability: dict[str, Any]) -> None:
    """Compare the build host's facts with this host's.

    Args:
        built, here: ``TensorRTRuntime.describe()`` at build time and now.
        portability: ``hardware_compatibility_level`` and ``version_compatible`` of the build.

    Raises:
        CompatibilityError: no GPU; another compute capability (unless built ``ampere+``
            and this GPU is sm80+); another TensorRT (unless version compatible and this one
            is newer); a driver older than the engine's CUDA needs.
    """
    gpu = built.get("gpu") or {}
    if not here.get("gpu"):
        raise CompatibilityError(
            f"built for {_gpu_text(gpu)}, running on no GPU: {here.get('problem')}"
        )
    _check_gpu(gpu, here["gpu"], portability.get("hardware_compatibility_level", "none"))
    _check_tensorrt(
        built.get("version"), here.get("version"), bool(portability.get("version_compatible"))
    )
    _check_driver(built, here)


def _gpu_text(gpu: dict) -> str:
    capability = str(gpu.get("compute_capability", "?")).replace(".", "")
    return f"sm{capability} ({gpu.get('name', 'unknown GPU')})"


def _check_gpu(built: dict, here: dict, level: str) -> None:
    same = built.get("compute_capability") == here["compute_capability"]
    if level == "ampere+":
        same = parse_version(here["compute_capability"])[:2] >= (8, 0)
    if not same:
        raise CompatibilityError(
            f"built for {_gpu_text(built)} (hardware compatibility "
            f"{level}), running on {_gpu_text(here)}; rebuild on this "
            "GPU class or build with hardware_compatibility_level"
        )


def _check_tensorrt(built: str | None, here: str | None, version_compatible: bool) -> None:
    if built == here:
        return
    if version_compatible and built and here and parse_version(here) >= parse_version(built):
        return
    raise CompatibilityError(
        f"built for TensorRT {built}, running on TensorRT {here}; "
        "builder and runtime must come from one release (C10)"
    )


def _check_driver(built: dict, here: dict) -> None:
    need, have = built.get("min_driver"), here.get("driver_version")
    if need and have and parse_version(have)[:3] < parse_version(need)[:3]:
        raise CompatibilityError(
            f"built for CUDA {built.get('cuda_version')} (driver >= "
            f"{need}), running on driver {have}; upgrade the driver"
        )
