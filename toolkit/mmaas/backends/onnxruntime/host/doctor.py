"""``mmaas doctor``'s ONNX Runtime GPU part: the CUDA execution provider, the CUDA version
ONNX Runtime was built for, the driver and its CUDA version (NVML, else nvidia-smi), and
whether the provider really creates a session here.

The provider list alone proves little: onnxruntime-gpu lists ``CUDAExecutionProvider``
even where no GPU or no cuDNN exists (C34). So doctor does what a GPU instance's preflight
does (:mod:`mmaas.backends.onnxruntime.runtime.gpu`) on a one-node graph: the session is
created with the serving providers and ``enable_fallback=0``, the CUDA provider must come
first and an output bound to the GPU must land there; else the reason ONNX Runtime logged
(no CUDA-capable device with ``CUDA_VISIBLE_DEVICES=""``, a library that did not load)
makes the back end not usable and doctor exit 1, as ``mmaas serve`` of a GPU model would.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def cuda_provider() -> tuple[str, str | None]:
    """One line (the providers, ORT's CUDA build, the driver and its CUDA version, whether
    a CUDA session runs here) and, when onnxruntime-gpu is installed but its CUDA provider
    cannot run a session here, why (:func:`cuda_session_problem`), else None."""
    import onnxruntime as ort

    providers = ort.get_available_providers()
    if "CUDAExecutionProvider" not in providers:
        return (
            f"CPU build (providers: {', '.join(providers)}); GPU models need "
            "onnxruntime-gpu (build.onnxruntime.device: gpu images install it)"
        ), None
    built = _build_cuda()
    driver = driver_facts()
    where = (
        f"driver {driver['driver']} (CUDA {driver['cuda']})"
        if "driver" in driver
        else f"no driver here ({driver['problem']})"
    )
    problem = cuda_session_problem()
    runs = "a CUDA session runs here" if problem is None else f"NO CUDA session: {problem}"
    return (
        f"CUDAExecutionProvider (onnxruntime-gpu built for CUDA {built}); {where}; {runs}",
        problem,
    )


def cuda_session_problem() -> str | None:
    """Why the CUDA provider cannot run a session here (ONNX Runtime's logged reason), or
    None: a one-node graph (``y = x + x``, FP32 [4]) is created with the CUDA and CPU
    providers and ``enable_fallback=0`` and run with its output bound to the GPU."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from mmaas.backends.onnxruntime.runtime.placement import capture_fd2, parse_placement
    from mmaas.backends.onnxruntime.runtime.providers import CPU, CUDA
    from mmaas.core.ort_io import ORT_FATAL

    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "x"], ["y"])],
        "doctor",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    options = ort.SessionOptions()
    options.log_severity_level = 0
    ort.set_default_logger_severity(3)
    try:
        with capture_fd2() as captured:
            session = ort.InferenceSession(
                model.SerializeToString(),
                options,
                providers=[(CUDA, {"device_id": "0"}), CPU],
                enable_fallback=0,
            )
        logged = "; ".join(parse_placement(captured.text).errors)
        if session.get_providers()[0] != CUDA:
            return logged or f"the session runs on {session.get_providers()}"
        binding = session.io_binding()
        binding.bind_cpu_input("x", np.ones(4, np.float32))
        binding.bind_output("y", "cuda")
        session.run_with_iobinding(binding)
        device = binding.get_outputs()[0].device_name().lower()
        return None if device == "cuda" else f"an output bound to the GPU landed on {device}"
    except Exception as exc:  # ORT's own error types (Fail, RuntimeException...)
        return f"ONNX Runtime could not start {CUDA}: {exc}"
    finally:
        ort.set_default_logger_severity(ORT_FATAL)


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
