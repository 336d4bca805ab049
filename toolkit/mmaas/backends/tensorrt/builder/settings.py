"""The TensorRT engine settings: what of ``build:`` in model.yaml changes a TensorRT engine,
as the build target writes them into the build request and the compiler reads them back
(one frozen type on both sides of the container boundary; defaults live in the spec)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TensorRTSettings:
    """trtexec settings of one engine build (``build`` and ``build.tensorrt`` in model.yaml).

    Attributes:
        version: the pinned TensorRT release (``"10.13"``).
        workspace_mib: the workspace memory pool in MiB (``--memPoolSize=workspace:N``).
        timing_cache: persist tactic timings (``--timingCacheFile``).
        builder_optimization_level: ``--builderOptimizationLevel`` (0-5).
        hardware_compatibility_level: ``none``, ``ampere+`` or ``same_compute_capability``.
        version_compatible: ``--versionCompatible``.
        timing_run: time the engine after the build (else ``--skipInference``).
        timing_cache_verify: ``--errorOnTimingCacheMiss``.
        calibration_cache: an INT8 calibration cache beside the ONNX file, or None.
        tolerance_atol, tolerance_rtol: how far an fp16-converted graph may be from fp32.
    """

    version: str
    workspace_mib: int
    timing_cache: bool
    builder_optimization_level: int
    hardware_compatibility_level: str
    version_compatible: bool
    timing_run: bool
    timing_cache_verify: bool
    calibration_cache: str | None
    tolerance_atol: float
    tolerance_rtol: float

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TensorRTSettings:
        """Read back the ``dataclasses.asdict`` form. Raises KeyError/TypeError."""
        return cls(**data)
