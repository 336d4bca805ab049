"""The ONNX Runtime engine settings: what of ``build:`` in model.yaml changes an ONNX Runtime
engine or how it is executed, as the build target writes them into the build request and
the compiler reads them back (one frozen type on both sides of the container boundary).
The compiler records :class:`GpuSettings` in the build report, so the runtime reads them
from the manifest (the server never reads model.yaml)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Shapes = Mapping[str, tuple[int, ...]]  # input name -> full shape


@dataclass(frozen=True)
class TensorRTProviderSettings:
    """The TensorRT execution provider's build options (ONNX Runtime's ``trt_*`` provider
    options), from ``build`` and ``build.tensorrt`` in model.yaml.

    Attributes:
        timing_cache: ``build.timing_cache`` (``trt_timing_cache_enable``).
        workspace_mib: ``build.workspace`` in MiB (``trt_max_workspace_size``, bytes).
        builder_optimization_level: ``trt_builder_optimization_level`` (0-5).
        calibration_cache: the INT8 calibration table's file name beside the engine
            (``trt_int8_calibration_table_name``), or None.
    """

    timing_cache: bool
    workspace_mib: int
    builder_optimization_level: int
    calibration_cache: str | None


@dataclass(frozen=True)
class GpuSettings:
    """How a GPU instance runs the engine (Triton: ``instance_group { kind: KIND_GPU }``,
    ``optimization.execution_accelerators.gpu_execution_accelerator`` and
    ``optimization.cuda.graphs``).

    Attributes:
        accelerator: ``cuda`` (CUDA execution provider) or ``tensorrt`` (TensorRT
            execution provider, CUDA for the nodes TensorRT does not take).
        cuda_graphs: capture one CUDA graph per shape of ``graph_shapes`` at start-up.
        graph_shapes: the shapes with a pinned session each (every input named in each;
            :mod:`~mmaas.backends.onnxruntime.runtime.graphs`), batch sizes ascending, its
            CUDA graph when ``cuda_graphs``; a batch between two pinned sizes is padded to
            the larger one.
        cudnn_conv_algo_search: ``exhaustive``, ``heuristic`` or ``default`` (the CUDA
            provider's ``cudnn_conv_algo_search``; heuristic starts faster).
        allow_cpu_fallback: serve on the CPU provider when CUDA cannot start (C34: off =
            the server refuses to become ready, naming the reason).
        tensorrt: the TensorRT provider's options (``accelerator: tensorrt``), or None.
    """

    accelerator: str
    cuda_graphs: bool
    graph_shapes: tuple[Shapes, ...]
    cudnn_conv_algo_search: str
    allow_cpu_fallback: bool
    tensorrt: TensorRTProviderSettings | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GpuSettings:
        """Read back the ``dataclasses.asdict`` form. Raises KeyError/TypeError."""
        trt = data.get("tensorrt")
        return cls(
            accelerator=data["accelerator"],
            cuda_graphs=data["cuda_graphs"],
            graph_shapes=tuple(
                {name: tuple(dims) for name, dims in shapes.items()}
                for shapes in data["graph_shapes"]
            ),
            cudnn_conv_algo_search=data["cudnn_conv_algo_search"],
            allow_cpu_fallback=data["allow_cpu_fallback"],
            tensorrt=None if trt is None else TensorRTProviderSettings(**trt),
        )


@dataclass(frozen=True)
class OnnxRuntimeSettings:
    """``graph_optimization_level``: ``basic``, ``extended`` or ``all``
    (``SessionOptions.graph_optimization_level``; ``build.onnxruntime`` in model.yaml);
    ``gpu``: the GPU instance settings (``build.onnxruntime.device: gpu``), None on CPU."""

    graph_optimization_level: str
    gpu: GpuSettings | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OnnxRuntimeSettings:
        """Read back the ``dataclasses.asdict`` form. Raises KeyError/TypeError."""
        gpu = data.get("gpu")
        return cls(
            graph_optimization_level=data["graph_optimization_level"],
            gpu=None if gpu is None else GpuSettings.from_json(gpu),
        )
