"""ONNX Runtime on a GPU, host side: the spec's ``build.onnxruntime`` device settings ->
:class:`GpuSettings`, and the combinations refused at validation (every problem at once,
each at its key).

Rules (Triton's words: an instance group of kind GPU, execution accelerators):

* ``target_precision``: fp32 on CPU; fp32, tf32, fp16 or bf16 with ``cuda`` (bf16: a graph
  exported in bf16, ONNX Runtime converts none); fp32, tf32, fp16 or int8 with
  ``tensorrt``; int8 needs a calibration source
  (``build.tensorrt.calibration_cache``, the TensorRT provider's calibration table);
* ``execution_accelerator``, ``cuda_graphs``, ``cuda_graph_shapes`` need ``device: gpu``;
  CUDA graphs are captured by the CUDA provider (not with ``tensorrt``);
* every shape of ``cuda_graph_shapes`` names every input, at a shape inside its profile;
  a graph replays only at its captured shapes, so shapes outside the profile can never run.
"""

from __future__ import annotations

from mmaas.backends.onnxruntime.runtime.settings import (
    GpuSettings,
    Shapes,
    TensorRTProviderSettings,
)
from mmaas.core.profile import outside
from mmaas.spec.model import InputSpec, ModelSpec
from mmaas.spec.yamlio import KeyPath

PRECISIONS = {
    "cpu": ("fp32",),
    "cuda": ("fp32", "tf32", "fp16", "bf16"),
    "tensorrt": ("fp32", "tf32", "fp16", "int8"),
}
Problem = tuple[tuple[str | int, ...], str]
_KEY = ("build", "onnxruntime")


def gpu_settings(spec: ModelSpec) -> GpuSettings | None:
    """The GPU settings of a completed ``spec``, None for ``device: cpu``."""
    ort = spec.build.onnxruntime
    if ort.device != "gpu":
        return None
    accelerator = ort.execution_accelerator or "cuda"
    trt = None
    if accelerator == "tensorrt":
        trt = TensorRTProviderSettings(
            timing_cache=spec.build.timing_cache,
            workspace_mib=spec.build.workspace,
            builder_optimization_level=spec.build.tensorrt.builder_optimization_level,
            calibration_cache=spec.build.tensorrt.calibration_cache,
        )
    return GpuSettings(
        accelerator=accelerator,
        cuda_graphs=ort.cuda_graphs,
        graph_shapes=graph_shapes(spec),
        cudnn_conv_algo_search=ort.cudnn_conv_algo_search,
        allow_cpu_fallback=ort.allow_cpu_fallback,
        tensorrt=trt,
    )


def graph_shapes(spec: ModelSpec) -> tuple[Shapes, ...]:
    """The shapes that get a pinned session of their own (a CUDA graph each with
    ``cuda_graphs``; :mod:`mmaas.backends.onnxruntime.runtime.graphs` says why every GPU
    model needs them): ``cuda_graph_shapes`` as given, else the opt shapes at the opt
    batch, at each preferred batch size and (dynamic batching on) at ``max_batch_size``,
    ascending."""
    ort = spec.build.onnxruntime
    if ort.cuda_graph_shapes:
        return tuple({name: tuple(dims) for name, dims in s.items()} for s in ort.cuda_graph_shapes)
    opt = {t.name: tuple(t.opt or ()) for t in spec.inputs}
    if spec.max_batch_size == 0 or not all(opt.values()):
        return (opt,)
    batches = {next(iter(opt.values()))[0]}
    batching = spec.runtime.dynamic_batching
    if batching is not None:
        batches |= {size for size in batching.preferred_batch_size if size <= spec.max_batch_size}
        batches.add(spec.max_batch_size)
    return tuple({n: (b, *dims[1:]) for n, dims in opt.items()} for b in sorted(batches))


def check_gpu_spec(spec: ModelSpec) -> list[Problem]:
    """Every combination of ``spec`` that cannot work on its device (module doc)."""
    ort = spec.build.onnxruntime
    problems: list[Problem] = []
    accelerator = "cpu" if ort.device == "cpu" else ort.execution_accelerator or "cuda"
    supported = PRECISIONS[accelerator]
    if spec.target_precision not in supported:
        if accelerator == "cpu":
            message = (
                f"backend onnxruntime builds {spec.target_precision} only on a GPU "
                "instance (device cpu supports: fp32); set build.onnxruntime.device: "
                "gpu, or backend: tensorrt"
            )
        else:
            message = (
                f"execution_accelerator {accelerator} does not run "
                f"{spec.target_precision} (it supports: {', '.join(supported)}); "
                "use execution_accelerator: tensorrt or another precision"
            )
        problems.append((("target_precision",), message))
    calibrated = bool(spec.build.tensorrt.calibration_cache)
    if spec.target_precision == "int8" and accelerator == "tensorrt" and not calibrated:
        problems.append(
            (
                ("target_precision",),
                "int8 needs a calibration source: set build.tensorrt.calibration_cache "
                "(the TensorRT provider's calibration table, beside the ONNX file)",
            )
        )
    if ort.device == "cpu":
        for key, value in (
            ("execution_accelerator", ort.execution_accelerator),
            ("cuda_graphs", ort.cuda_graphs),
            ("cuda_graph_shapes", ort.cuda_graph_shapes),
        ):
            if value:
                problems.append(
                    (
                        (*_KEY, key),
                        f"{key} needs a GPU instance; set "
                        "build.onnxruntime.device: gpu or remove it",
                    )
                )
        return problems
    if ort.cuda_graphs and accelerator == "tensorrt":
        problems.append(
            (
                (*_KEY, "cuda_graphs"),
                "CUDA graphs are captured by the CUDA "
                "provider; set execution_accelerator: cuda or cuda_graphs: false",
            )
        )
    if ort.cuda_graph_shapes and not ort.cuda_graphs:
        problems.append(
            (
                (*_KEY, "cuda_graph_shapes"),
                "cuda_graph_shapes without "
                "cuda_graphs: true captures nothing; set cuda_graphs: true",
            )
        )
    inputs = {t.name: t for t in spec.inputs}
    for index, shapes in enumerate(ort.cuda_graph_shapes):
        problems.extend(_check_graph_shape((*_KEY, "cuda_graph_shapes", index), shapes, inputs))
    return problems


def _check_graph_shape(
    path: KeyPath, shapes: dict[str, tuple[int, ...]], inputs: dict[str, InputSpec]
) -> list[Problem]:
    problems: list[Problem] = []
    missing = [name for name in inputs if name not in shapes]
    if missing:
        problems.append(
            (
                path,
                f"a captured graph needs every input's shape; missing "
                f"{', '.join(map(repr, missing))}",
            )
        )
    for name, shape in shapes.items():
        tensor = inputs.get(name)
        if tensor is None:
            problems.append(
                (
                    (*path, name),
                    f"the model has no input {name!r}; its inputs "
                    f"are: {', '.join(map(repr, inputs))}",
                )
            )
            continue
        low, high = tuple(tensor.min or ()), tuple(tensor.max or ())
        if len(shape) != len(low) or outside(shape, low, high) is not None:
            problems.append(
                (
                    (*path, name),
                    f"shape {list(shape)} is outside the optimization "
                    f"profile (min {list(low)}, max {list(high)}); a graph replays "
                    "only at its captured shape, so capture shapes inside it",
                )
            )
    return problems
