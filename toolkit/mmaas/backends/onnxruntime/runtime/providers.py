"""The execution providers of a GPU session and their options, as ONNX Runtime's
``InferenceSession(providers=[(name, options), ...])`` takes them. Pure: no GPU needed, so
the exact lists are tested here (the TensorRT provider by contract: no TensorRT library
exists on the development machines).

CUDA provider options (ONNX Runtime's CUDA EP documentation): ``device_id`` (0: the first
GPU that ``CUDA_VISIBLE_DEVICES`` leaves visible, a MIG instance included),
``cudnn_conv_algo_search`` (EXHAUSTIVE / HEURISTIC / DEFAULT), ``use_tf32`` (the provider's
default is 1: TensorFloat-32 matmuls and convolutions; ``target_precision: fp32`` turns it
off, measured on the H200: ppocr-det max abs diff to CPU 0.045 with TF32, 6.6e-5 without),
``enable_cuda_graph`` (capture and replay through I/O binding).

TensorRT provider options (``trt_*``): the optimization profile as
``trt_profile_min_shapes/opt_shapes/max_shapes`` (``name:1x3x32x32,name2:...``), the
workspace from ``build.workspace`` (``trt_max_workspace_size``, bytes), engine and timing
caches under one directory (``trt_engine_cache_*``, ``trt_timing_cache_*`` from
``build.timing_cache``), ``trt_builder_optimization_level``, ``trt_fp16_enable`` and
``trt_int8_enable`` + ``trt_int8_calibration_table_name`` from the precision.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mmaas.backends.onnxruntime.runtime.settings import GpuSettings, TensorRTProviderSettings
from mmaas.core.manifest import TensorInfo
from mmaas.core.samples import profile_shape

CUDA = "CUDAExecutionProvider"
TENSORRT = "TensorrtExecutionProvider"
CPU = "CPUExecutionProvider"
Provider = tuple[str, dict[str, str]]


def cuda_options(gpu: GpuSettings, precision: str, *, graphs: bool) -> dict[str, str]:
    """The CUDA provider's options (module doc); ``graphs``: ``enable_cuda_graph``."""
    options = {
        "device_id": "0",
        "cudnn_conv_algo_search": gpu.cudnn_conv_algo_search.upper(),
        "use_tf32": "0" if precision == "fp32" else "1",
    }
    if graphs:
        options["enable_cuda_graph"] = "1"
    return options


def tensorrt_options(
    trt: TensorRTProviderSettings,
    precision: str,
    inputs: Sequence[TensorInfo],
    cache_dir: Path,
    model_dir: Path,
) -> dict[str, str]:
    """The TensorRT provider's options (module doc); engines and timing caches live in
    ``cache_dir``, the INT8 calibration table beside the engine in ``model_dir``."""
    options = {
        "device_id": "0",
        "trt_max_workspace_size": str(trt.workspace_mib * 1024 * 1024),
        "trt_builder_optimization_level": str(trt.builder_optimization_level),
        "trt_engine_cache_enable": "True",
        "trt_engine_cache_path": str(cache_dir),
        "trt_timing_cache_enable": str(trt.timing_cache),
        "trt_timing_cache_path": str(cache_dir),
        "trt_profile_min_shapes": profile_text(inputs, "min"),
        "trt_profile_opt_shapes": profile_text(inputs, "opt"),
        "trt_profile_max_shapes": profile_text(inputs, "max"),
    }
    if precision == "fp16":
        options["trt_fp16_enable"] = "True"
    if precision == "int8":
        options["trt_int8_enable"] = "True"
        if trt.calibration_cache:
            options["trt_int8_calibration_table_name"] = str(model_dir / trt.calibration_cache)
    return options


def providers(
    gpu: GpuSettings,
    precision: str,
    inputs: Sequence[TensorInfo],
    *,
    graphs: bool,
    cache_dir: Path,
    model_dir: Path,
) -> list[Provider]:
    """The session's providers in priority order: ``tensorrt``: TensorRT, CUDA, CPU;
    ``cuda``: CUDA, CPU (the CPU provider takes the shape nodes ONNX Runtime puts there)."""
    chain: list[Provider] = [(CUDA, cuda_options(gpu, precision, graphs=graphs)), (CPU, {})]
    if gpu.accelerator == "tensorrt" and gpu.tensorrt is not None:
        trt = tensorrt_options(gpu.tensorrt, precision, inputs, cache_dir, model_dir)
        chain.insert(0, (TENSORRT, trt))
    return chain


def profile_text(inputs: Sequence[TensorInfo], point: str) -> str:
    """``name:1x3x32x32,name2:...`` at ``point`` (``min``, ``opt``, ``max``): the TensorRT
    provider's profile option format."""
    return ",".join(
        f"{t.name}:{'x'.join(map(str, profile_shape(t, point)))}"  # type: ignore[arg-type]
        for t in inputs
    )
