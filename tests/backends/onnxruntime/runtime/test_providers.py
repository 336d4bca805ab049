"""The execution providers of a GPU session and their options, without a GPU: the CUDA
provider's by precision, the TensorRT provider's by contract (no TensorRT library exists
here), and the profile text it takes."""

from __future__ import annotations

from pathlib import Path

from mmaas.backends.onnxruntime.runtime.providers import profile_text, providers
from mmaas.backends.onnxruntime.runtime.settings import GpuSettings, TensorRTProviderSettings
from mmaas.core.manifest import TensorInfo

DET_INPUT = (
    TensorInfo("x", "FP32", (-1, 3, -1, -1), (1, 3, 32, 32), (1, 3, 640, 640), (8, 3, 1280, 1280)),
)


def test_cuda_provider_options_follow_the_precision() -> None:
    gpu = GpuSettings("cuda", True, (), "heuristic", False)
    chain = providers(
        gpu, "fp32", DET_INPUT, graphs=True, cache_dir=Path("/c"), model_dir=Path("/m")
    )
    assert chain == [
        (
            "CUDAExecutionProvider",
            {
                "device_id": "0",
                "cudnn_conv_algo_search": "HEURISTIC",
                "use_tf32": "0",
                "enable_cuda_graph": "1",
            },
        ),
        ("CPUExecutionProvider", {}),
    ]
    tf32 = providers(
        gpu, "tf32", DET_INPUT, graphs=False, cache_dir=Path("/c"), model_dir=Path("/m")
    )
    assert tf32[0][1] == {"device_id": "0", "cudnn_conv_algo_search": "HEURISTIC", "use_tf32": "1"}


def test_tensorrt_provider_options_by_contract_no_tensorrt_library_here() -> None:
    trt = TensorRTProviderSettings(
        timing_cache=True,
        workspace_mib=2048,
        builder_optimization_level=3,
        calibration_cache="calib.cache",
    )
    gpu = GpuSettings("tensorrt", False, (), "exhaustive", False, trt)
    chain = providers(
        gpu,
        "int8",
        DET_INPUT,
        graphs=False,
        cache_dir=Path("/var/trt"),
        model_dir=Path("/opt/mmaas/model"),
    )
    assert [name for name, _ in chain] == [
        "TensorrtExecutionProvider",
        "CUDAExecutionProvider",
        "CPUExecutionProvider",
    ]
    assert chain[0][1] == {
        "device_id": "0",
        "trt_max_workspace_size": str(2048 * 1024 * 1024),
        "trt_builder_optimization_level": "3",
        "trt_engine_cache_enable": "True",
        "trt_engine_cache_path": "/var/trt",
        "trt_timing_cache_enable": "True",
        "trt_timing_cache_path": "/var/trt",
        "trt_profile_min_shapes": "x:1x3x32x32",
        "trt_profile_opt_shapes": "x:1x3x640x640",
        "trt_profile_max_shapes": "x:8x3x1280x1280",
        "trt_int8_enable": "True",
        "trt_int8_calibration_table_name": "/opt/mmaas/model/calib.cache",
    }
    fp16 = providers(
        gpu, "fp16", DET_INPUT, graphs=False, cache_dir=Path("/c"), model_dir=Path("/m")
    )
    assert fp16[0][1]["trt_fp16_enable"] == "True" and "trt_int8_enable" not in fp16[0][1]
    two = (*DET_INPUT, TensorInfo("grid_thw", "INT64", (-1, 3), (1, 3), (1, 3), (8, 3)))
    assert profile_text(two, "max") == "x:8x3x1280x1280,grid_thw:8x3"
