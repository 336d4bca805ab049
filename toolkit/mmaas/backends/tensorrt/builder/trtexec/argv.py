"""The trtexec argument vector of one engine build: spec + target TensorRT release -> argv.

Pure: no I/O, no subprocess. Every flag comes from the row of
:mod:`mmaas.backends.tensorrt.runtime.releases` for the target release (checked against trtexec's
``sampleOptions.cpp``); a setting that needs a flag the release lacks is refused with
:class:`~mmaas.core.errors.SpecError` before any build.

Shape specs (``--minShapes`` / ``--optShapes`` / ``--maxShapes``) come from
:mod:`mmaas.backends.tensorrt.builder.trtexec.shapes`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mmaas.backends.tensorrt.builder.settings import TensorRTSettings
from mmaas.backends.tensorrt.builder.trtexec.shapes import profile_args
from mmaas.backends.tensorrt.runtime.releases import (
    FP8_MIN_COMPUTE_CAPABILITY,
    TrtexecFlags,
    parse_version,
    trtexec_flags,
)
from mmaas.core.errors import SpecError, SpecProblem, UsageError
from mmaas.core.manifest import ModelInfo

DEFAULT_OPTIMIZATION_LEVEL = 3
HARDWARE_LEVEL_FLAG_VALUES = {
    "none": "none",
    "ampere+": "ampere+",
    "same_compute_capability": "sameComputeCapability",
}


def trtexec_argv(
    model: ModelInfo,
    settings: TensorRTSettings,
    trt_version: str,
    onnx: str,
    engine: str,
    timing_cache: str | None = None,
    *,
    exports_dir: str | None = None,
    calibration_cache: str | None = None,
    typed_graph: bool = False,
    compute_capability: str | None = None,
    verify_cache: bool = False,
    trtexec: str = "trtexec",
    spec_file: str = "model.yaml",
    network: Mapping[str, Sequence[int]] | None = None,
) -> list[str]:
    """The full trtexec argv that builds ``engine`` from ``onnx``.

    Args:
        model: tensors and optimization profile (min/opt/max per input, full shapes).
        settings: the engine settings (workspace MiB, builder optimization level,
            hardware / version compatibility, timing run).
        trt_version: target TensorRT release, e.g. ``"10.13"``.
        onnx, engine: paths as trtexec sees them.
        timing_cache: ``--timingCacheFile`` path, or None for no persisted cache.
        exports_dir: directory for the JSON exports (``layers.json``, and with a timing
            run ``times.json`` and ``profile.json``), or None.
        calibration_cache: INT8 calibration cache (``--calib``), or None.
        typed_graph: the ONNX graph already carries the target precision (fp16/bf16
            tensors or Q/DQ nodes): built strongly typed where the release can.
        compute_capability: target GPU, e.g. ``"8.6"``; checked for fp8 when known.
        verify_cache: add ``--errorOnTimingCacheMiss`` (proves a rebuild reused the cache).
        network: the ONNX file's input dims (:func:`~mmaas.backends.tensorrt.builder.trtexec.
            network.network_inputs`), which decide the inputs that need shapes; None: the
            served shapes.

    Raises:
        SpecError: every setting the release cannot express, each with its key path.
    """
    flags, problems = _release(trt_version, spec_file)
    argv = [trtexec, f"--onnx={onnx}", f"--saveEngine={engine}"]
    argv += profile_args(model, flags.scalar_shapes, problems, spec_file, network) if flags else []
    if flags:
        argv.append(_workspace_arg(settings.workspace_mib, flags))
        argv += _precision_args(
            model.precision,
            flags,
            typed_graph,
            calibration_cache,
            compute_capability,
            problems,
            spec_file,
        )
        argv += _builder_args(settings, flags, problems, spec_file)
        argv += _cache_args(timing_cache, verify_cache, flags, problems, spec_file)
        argv += _run_args(settings.timing_run, exports_dir, flags)
    if problems:
        raise SpecError(problems)
    return argv


def _release(version: str, spec_file: str) -> tuple[TrtexecFlags | None, list[SpecProblem]]:
    try:
        return trtexec_flags(version), []
    except UsageError as exc:
        return None, [SpecProblem(spec_file, "build.tensorrt.version", str(exc))]


def _workspace_arg(mib: int, flags: TrtexecFlags) -> str:
    if flags.workspace_flag == "--workspace":
        return f"--workspace={mib}"
    return f"--memPoolSize=workspace:{mib}{flags.workspace_suffix}"


def _precision_args(
    precision: str,
    flags: TrtexecFlags,
    typed_graph: bool,
    calib: str | None,
    capability: str | None,
    problems: list[SpecProblem],
    spec_file: str,
) -> list[str]:
    def refuse(message: str) -> list[str]:
        problems.append(SpecProblem(spec_file, "target_precision", message))
        return []

    if precision in ("fp32", "tf32"):
        return ["--noTF32"] if precision == "fp32" else []
    if (
        precision == "fp8"
        and capability
        and (parse_version(capability)[:2] < FP8_MIN_COMPUTE_CAPABILITY)
    ):
        return refuse(f"fp8 needs compute capability 8.9 or newer; the target GPU is {capability}")
    if typed_graph and (flags.strongly_typed or flags.always_strongly_typed):
        return [] if flags.always_strongly_typed else ["--stronglyTyped"]
    if flags.always_strongly_typed:
        return refuse(
            f"TensorRT {flags.release}+ has no precision flags (every network is "
            f"strongly typed): the ONNX graph must already be {precision} "
            "(fp16: converted in the builder stage; int8/fp8: Q/DQ nodes; bf16: "
            "convert offline, e.g. ModelOpt AutoCast)"
        )
    if precision not in flags.precisions:
        return refuse(
            f"{precision} builds need TensorRT 10 or newer (target row "
            f"{flags.release} has no --{precision})"
        )
    if precision == "int8" and not (calib or typed_graph):
        return refuse(
            "int8 needs a calibration cache (build.tensorrt.calibration_cache) or "
            "an ONNX graph with Q/DQ nodes; without either the scales are dummies"
        )
    if precision == "fp8" and not typed_graph:
        return refuse("fp8 needs an ONNX graph with Q/DQ nodes (trtexec has no fp8 calibration)")
    return [f"--{precision}"] + ([f"--calib={calib}"] if precision == "int8" and calib else [])


def _builder_args(
    trt: TensorRTSettings, flags: TrtexecFlags, problems: list[SpecProblem], spec_file: str
) -> list[str]:
    args: list[str] = []
    level = trt.builder_optimization_level
    if flags.builder_optimization_level:
        args.append(f"--builderOptimizationLevel={level}")
    elif level != DEFAULT_OPTIMIZATION_LEVEL:
        problems.append(
            _missing(spec_file, "builder_optimization_level", "--builderOptimizationLevel", flags)
        )
    hardware = HARDWARE_LEVEL_FLAG_VALUES[trt.hardware_compatibility_level]
    if hardware in flags.hardware_levels:
        args.append(f"--hardwareCompatibilityLevel={hardware}")
    elif hardware != "none":
        problems.append(
            _missing(
                spec_file,
                "hardware_compatibility_level",
                f"--hardwareCompatibilityLevel={hardware}",
                flags,
            )
        )
    if trt.version_compatible:
        if flags.version_compatible:
            args.append("--versionCompatible")
        else:
            problems.append(_missing(spec_file, "version_compatible", "--versionCompatible", flags))
    return args


def _cache_args(
    timing_cache: str | None,
    verify: bool,
    flags: TrtexecFlags,
    problems: list[SpecProblem],
    spec_file: str,
) -> list[str]:
    if timing_cache is None:
        return []
    if verify and not flags.error_on_cache_miss:
        problems.append(
            _missing(spec_file, "timing_cache_verify", "--errorOnTimingCacheMiss", flags)
        )
        return [f"--timingCacheFile={timing_cache}"]
    return [f"--timingCacheFile={timing_cache}"] + (["--errorOnTimingCacheMiss"] if verify else [])


def _run_args(timing_run: bool, exports_dir: str | None, flags: TrtexecFlags) -> list[str]:
    args = [] if timing_run else [flags.skip_inference_flag]
    if exports_dir is None:
        return args
    if flags.layer_info:
        args += ["--profilingVerbosity=detailed", f"--exportLayerInfo={exports_dir}/layers.json"]
    if timing_run:
        args += [
            f"--exportTimes={exports_dir}/times.json",
            f"--exportProfile={exports_dir}/profile.json",
        ]
    return args


def _missing(spec_file: str, key: str, flag: str, flags: TrtexecFlags) -> SpecProblem:
    return SpecProblem(
        spec_file,
        f"build.tensorrt.{key}",
        f"trtexec of TensorRT {flags.release}.x-era releases has no {flag}; "
        "use a newer build.tensorrt.version or drop the setting",
    )
