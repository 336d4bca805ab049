"""ONNX Runtime: the builder part of the back end (its compiler), run in the builder stage.

ONNX Runtime's offline graph optimization (``SessionOptions.graph_optimization_level`` +
``optimized_model_filepath``) serialises the optimized graph as ``model.ort.onnx``. The
optimized model always carries its own weights: initializers of at least
:data:`EXTERNAL_MIN_BYTES` go to ``model.ort.onnx.data`` beside it (the ONNX external data
format; session config ``session.optimized_model_external_initializers_file_name``), so an
engine never points at the source's external data and is never over protobuf's 2 GiB limit.
The latency gate times it with wall time around ``Engine.infer`` (no probe of its own).

On GPU (``build.onnxruntime.device: gpu``) the offline pass is ``basic`` whatever the level:
its rewrites (constant folding, Conv+BN fusion...) are provider-independent, while the
``extended``/``all`` fusions depend on the provider and run when the GPU session loads.
``target_precision: fp16`` with the CUDA provider converts that graph to fp16
(:mod:`~mmaas.backends.onnxruntime.builder.fp16`), unless the exporter wrote it in that type
already (most of its floating-point weights are: a typed graph, e.g. a decoder whose KV cache
inputs are fp16, which a conversion keeping fp32 inputs would break); ``bf16`` takes only a
typed graph (there is no bf16 conversion). A typed graph is copied as it is, not optimized
offline (the CPU provider that optimizes has no bf16 kernels; the GPU session optimizes it).
The GPU settings are written beside the engine as :data:`EXECUTION_FILE` (an engine data file,
hashed with it), which is how the runtime knows to open a GPU session.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmaas.backends import CompileRequest, CompileResult, LatencyProbe
from mmaas.backends.onnxruntime.runtime import (
    ENGINE_FILE,
    EXECUTION_FILE,
    PROVIDERS,
    OnnxRuntimeRuntime,
)
from mmaas.backends.onnxruntime.runtime.settings import OnnxRuntimeSettings
from mmaas.core.errors import BuildError
from mmaas.core.files import atomic_write_text
from mmaas.core.manifest import Manifest
from mmaas.core.ort_io import import_onnxruntime, session_options

if TYPE_CHECKING:
    import onnxruntime as ort
else:  # what onnxruntime prints at import goes to the debug log, not the console
    ort = import_onnxruntime()

ENGINE_DATA_FILE = "model.ort.onnx.data"
EXTERNAL_MIN_BYTES = 1024  # ONNX Runtime's default: smaller initializers stay in the graph
LEVELS = {
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


class OnnxRuntimeCompiler:
    """The builder part's compiler of the ONNX Runtime back end; see the module docstring."""

    name = "onnxruntime"
    runtime = OnnxRuntimeRuntime(build_check=True)

    def read_settings(self, data: Mapping[str, Any]) -> OnnxRuntimeSettings:
        """:class:`OnnxRuntimeSettings` from the build request."""
        return OnnxRuntimeSettings.from_json(data)

    def compile(self, request: CompileRequest) -> CompileResult:
        """Optimize ``request.source`` offline into ``out_dir/model.ort.onnx`` (plus
        ``model.ort.onnx.data`` when an initializer has :data:`EXTERNAL_MIN_BYTES` or more).

        ``request.settings`` is an :class:`OnnxRuntimeSettings`. Raises BuildError when ONNX
        Runtime rejects the model (the message is ONNX Runtime's).
        """
        settings: OnnxRuntimeSettings = request.settings
        started = time.perf_counter()
        precision = request.model.precision
        gpu_typed = settings.gpu is not None and precision in ("fp16", "bf16")
        if gpu_typed and typed_graph(request.source, precision):  # no CPU kernels for bf16
            copy_graph(request.source, request.out_dir / ENGINE_FILE)
            typed = {"graph_optimization_level": "none (typed graph)",
                     **self._gpu(request, settings, typed=True)}  # fmt: skip
            typed["compile_ms"] = round((time.perf_counter() - started) * 1000, 3)
            return CompileResult(ENGINE_FILE, ["onnx.save", request.source.name, ENGINE_FILE],
                                 typed)  # fmt: skip
        level = "basic" if settings.gpu is not None else settings.graph_optimization_level
        options = session_options(ort)  # the hardware-specific warning is in the manifest
        options.graph_optimization_level = LEVELS[level]
        options.optimized_model_filepath = str(request.out_dir / ENGINE_FILE)
        options.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name", ENGINE_DATA_FILE
        )
        options.add_session_config_entry(
            "session.optimized_model_external_initializers_min_size_in_bytes",
            str(EXTERNAL_MIN_BYTES),
        )
        try:
            ort.InferenceSession(str(request.source), options, providers=PROVIDERS)
        except Exception as exc:  # ORT raises its own untyped exceptions
            raise BuildError(f"ONNX Runtime could not load {request.source.name}: {exc}") from exc
        report: dict[str, Any] = {"graph_optimization_level": level}
        if settings.gpu is not None:
            report.update(self._gpu(request, settings))
        report["compile_ms"] = round((time.perf_counter() - started) * 1000, 3)
        return CompileResult(
            engine_file=ENGINE_FILE,
            command=[
                "onnxruntime.InferenceSession",
                request.source.name,
                f"graph_optimization_level={level}",
                f"optimized_model_filepath={ENGINE_FILE}",
                f"optimized_model_external_initializers_file_name={ENGINE_DATA_FILE}",
            ],
            report=report,
        )

    def _gpu(
        self, request: CompileRequest, settings: OnnxRuntimeSettings, typed: bool = False
    ) -> dict[str, Any]:
        """fp16 conversion (CUDA provider) and the execution file; the report's GPU part."""
        assert settings.gpu is not None
        report: dict[str, Any] = {
            "device": "gpu",
            "execution_accelerator": settings.gpu.accelerator,
        }
        precision = request.model.precision
        if typed:
            report["typed_graph"] = precision
        elif precision == "bf16":
            raise BuildError(
                f"{request.source.name} is not a bf16 graph and ONNX Runtime has no bf16 "
                "conversion; export the graph in bf16 (mmaas convert qwen2-vl --precision "
                "bf16) or set target_precision: fp16"
            )
        elif precision == "fp16" and settings.gpu.accelerator == "cuda":
            from mmaas.backends.onnxruntime.builder.fp16 import convert_to_fp16

            block = convert_to_fp16(
                request.out_dir / ENGINE_FILE, ENGINE_DATA_FILE, EXTERNAL_MIN_BYTES
            )
            report["fp16_conversion"] = {
                "after": "basic optimization (Conv+BN fused)",
                "op_block_list": block,
                "keep_io_types": True,
            }
        atomic_write_text(
            request.out_dir / EXECUTION_FILE,
            json.dumps({"device": "gpu", "gpu": asdict(settings.gpu)}, indent=2, sort_keys=True)
            + "\n",
        )
        return report

    def data_files(self, directory: Path) -> tuple[str, ...]:
        """The engine's data files in ``directory`` after :meth:`compile`:
        ``model.ort.onnx.data`` unless every initializer stayed in the graph, and
        ``execution.json`` for a GPU engine."""
        names = (ENGINE_DATA_FILE, EXECUTION_FILE)
        return tuple(name for name in names if (directory / name).is_file())

    def latency_probe(self, directory: Path, manifest: Manifest) -> LatencyProbe | None:
        """None: the latency gate times ``Engine.infer`` itself (one ``session.run``)."""
        return None


def typed_graph(source: Path, precision: str) -> bool:
    """True when most floating-point weights of the ONNX graph ``source`` (by element count;
    external data is not read) are already of ``precision`` (fp16 or bf16)."""
    import onnx

    wanted = {"fp16": onnx.TensorProto.FLOAT16, "bf16": onnx.TensorProto.BFLOAT16}[precision]
    floating = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)
    counts = {kind: 0 for kind in floating}
    for tensor in onnx.load(str(source), load_external_data=False).graph.initializer:
        if tensor.data_type in counts:
            counts[tensor.data_type] += math.prod(tensor.dims)
    return counts[wanted] * 2 > sum(counts.values())


def copy_graph(source: Path, engine: Path) -> None:
    """The source graph as the engine file, unoptimized (ONNX Runtime optimizes it when the
    GPU session loads), its weights of :data:`EXTERNAL_MIN_BYTES` or more in
    :data:`ENGINE_DATA_FILE` beside it; both readable by the image's user (mode 0644)."""
    import onnx

    model = onnx.load(str(source))
    onnx.save_model(model, str(engine), save_as_external_data=True, location=ENGINE_DATA_FILE,
                    size_threshold=EXTERNAL_MIN_BYTES)  # fmt: skip
    for path in (engine, engine.with_name(ENGINE_DATA_FILE)):  # onnx writes the data 0600
        if path.exists():
            path.chmod(0o644)
