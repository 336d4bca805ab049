"""``mmaas doctor``'s ONNX Runtime GPU part: the CUDA execution provider, the CUDA version
ONNX Runtime was built for, and the driver and its CUDA version (NVML, else nvidia-smi).

The provider list alone proves little: onnxruntime-gpu lists ``CUDAExecutionProvider``
even where no GPU or no cuDNN exists (C34). So the line says what was found and what a GPU
session still needs; the server's preflight is the check that counts.
"""

from __future__ import annotations

from typing import Any


def cuda_provider() -> str:
    """One line: the providers, ORT's CUDA build, the driver and its CUDA version."""
    import onnxruntime as ort

    providers = ort.get_available_providers()
    if "CUDAExecutionProvider" not in providers:
        return (
            f"CPU build (providers: {', '.join(providers)}); GPU models need "
            "onnxruntime-gpu (build.onnxruntime.device: gpu images install it)"
        )
    built = _build_cuda()
    driver = driver_facts()
    where = (
        f"driver {driver['driver']} (CUDA {driver['cuda']})"
        if "driver" in driver
        else f"no driver here ({driver['problem']})"
    )
    return f"CUDAExecutionProvider (onnxruntime-gpu built for CUDA {built}); {where}"


def driver_facts() -> dict[str, Any]:
    """``{"driver", "cuda", "gpus"}`` from NVML, else nvidia-smi; ``{"problem"}`` if neither."""
    try:
        import pynvml

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        return {
            "driver": version.decode() if isinstance(version, bytes) else version,
            "cuda": f"{cuda // 1000}.{cuda % 1000 // 10}",
            "gpus": pynvml.nvmlDeviceGetCount(),
        }
    except Exception as exc:  # no pynvml, no libnvidia-ml
        from mmaas.backends.tensorrt.runtime.gpu import query_gpus

        report = query_gpus()
        if not report.gpus:
            return {"problem": report.problem or str(exc)}
        return {
            "driver": report.gpus[0].driver_version,
            "cuda": report.driver_cuda,
            "gpus": len(report.gpus),
        }


def _build_cuda() -> str:
    try:
        from onnxruntime.capi import build_and_package_info as info
    except ImportError:
        return "unknown"
    return str(getattr(info, "cuda_version", "unknown"))
