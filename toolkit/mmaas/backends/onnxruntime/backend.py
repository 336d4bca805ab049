"""ONNX Runtime (CPU) engine back end.

compile: ONNX Runtime's offline graph optimization (``SessionOptions.
graph_optimization_level`` + ``optimized_model_filepath``) serialises the optimized graph
as ``model.ort.onnx``. At level ``all`` the layout transforms (NCHWc blocking) depend on
the build CPU's vector extensions, so the manifest records the CPU flags and
:meth:`OnnxRuntimeBackend.check_compatible` refuses a host that lacks one of them.
The optimized model always carries its own weights: initializers of at least
:data:`EXTERNAL_MIN_BYTES` go to ``model.ort.onnx.data`` beside it (the ONNX external data
format; session config ``session.optimized_model_external_initializers_file_name``), so an
engine never points at the source's external data and is never over protobuf's 2 GiB limit.
load: the optimized model is opened with optimizations off (they are already applied),
which also keeps start-up short.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from mmaas.backends import CompileRequest, CompileResult
from mmaas.core.errors import BuildError, CompatibilityError, InputError
from mmaas.core.manifest import Manifest

ENGINE_FILE = "model.ort.onnx"
ENGINE_DATA_FILE = "model.ort.onnx.data"
EXTERNAL_MIN_BYTES = 1024  # ONNX Runtime's default: smaller initializers stay in the graph
LEVELS = {
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}
# x86 vector extensions that ONNX Runtime's CPU kernels and NCHWc layout depend on.
KERNEL_CPU_FLAGS = (
    "sse4_1",
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx_vnni",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
)
PROVIDERS = ["CPUExecutionProvider"]


class OnnxRuntimeEngine:
    """A loaded ONNX Runtime session (CPU execution provider)."""

    def __init__(self, session: ort.InferenceSession) -> None:
        self.session = session

    def infer(
        self, inputs: Mapping[str, np.ndarray], outputs: Sequence[str]
    ) -> dict[str, np.ndarray]:
        """Run ``session.run`` once; returns ``{name: array}`` for the requested outputs."""
        names = list(outputs)
        values = self.session.run(
            names, {name: _to_ort(name, array) for name, array in inputs.items()}
        )
        return {name: _from_ort(value) for name, value in zip(names, values, strict=True)}


class OnnxRuntimeBackend:
    """The CPU back end; see the module docstring."""

    name = "onnxruntime"

    def compile(self, request: CompileRequest) -> CompileResult:
        """Optimize ``request.source`` offline into ``out_dir/model.ort.onnx`` (plus
        ``model.ort.onnx.data`` when an initializer has :data:`EXTERNAL_MIN_BYTES` or more).

        ``settings["onnxruntime"]["graph_optimization_level"]`` is ``basic``,
        ``extended`` or ``all`` (default). Raises BuildError when ONNX Runtime rejects the
        model (the message is ONNX Runtime's).
        """
        level = request.settings.get("onnxruntime", {}).get("graph_optimization_level", "all")
        options = ort.SessionOptions()
        options.graph_optimization_level = LEVELS[level]
        options.optimized_model_filepath = str(request.out_dir / ENGINE_FILE)
        options.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name", ENGINE_DATA_FILE
        )
        options.add_session_config_entry(
            "session.optimized_model_external_initializers_min_size_in_bytes",
            str(EXTERNAL_MIN_BYTES),
        )
        options.log_severity_level = 3  # the hardware-specific warning is in the manifest
        started = time.perf_counter()
        try:
            ort.InferenceSession(str(request.source), options, providers=PROVIDERS)
        except Exception as exc:  # ORT raises its own untyped exceptions
            raise BuildError(f"ONNX Runtime could not load {request.source.name}: {exc}") from exc
        compile_ms = (time.perf_counter() - started) * 1000
        return CompileResult(
            engine_file=ENGINE_FILE,
            command=[
                "onnxruntime.InferenceSession",
                request.source.name,
                f"graph_optimization_level={level}",
                f"optimized_model_filepath={ENGINE_FILE}",
                f"optimized_model_external_initializers_file_name={ENGINE_DATA_FILE}",
            ],
            report={"graph_optimization_level": level, "compile_ms": round(compile_ms, 3)},
        )

    def data_files(self, directory: Path) -> tuple[str, ...]:
        """The engine's data files in ``directory`` after :meth:`compile`:
        ``("model.ort.onnx.data",)``, or ``()`` when every initializer stayed in the graph."""
        return (ENGINE_DATA_FILE,) if (directory / ENGINE_DATA_FILE).is_file() else ()

    def load(self, directory: Path, manifest: Manifest, threads: int = 0) -> OnnxRuntimeEngine:
        """Open ``directory/<engine>`` with optimizations off and ``threads`` intra-op
        threads (0 = ONNX Runtime's default, one per core). With fewer threads than cores
        (several instances) the pool does not spin (``session.intra_op.allow_spinning``)."""
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.log_severity_level = 3  # errors reach the caller as exceptions, once
        options.intra_op_num_threads = threads
        if 0 < threads < (os.cpu_count() or 1):
            # several instances share the cores: spinning thread pools would fight
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(
            str(directory / manifest.engine.path), options, providers=PROVIDERS
        )
        return OnnxRuntimeEngine(session)

    def describe(self) -> dict[str, Any]:
        """``{"name", "version", "cpu": {"arch", "model", "flags"}}``; flags are the
        entries of :data:`KERNEL_CPU_FLAGS` this CPU has (from /proc/cpuinfo)."""
        model, flags = _cpuinfo()
        return {
            "name": self.name,
            "version": ort.__version__,
            "cpu": {
                "arch": platform.machine(),
                "model": model,
                "flags": sorted(set(KERNEL_CPU_FLAGS) & flags),
            },
        }

    def check_compatible(self, manifest: Manifest) -> None:
        """Refuse an engine built by another ONNX Runtime version, another CPU
        architecture, or (at level ``all``) on a CPU with vector extensions this one lacks.

        Raises:
            CompatibilityError: naming what the engine was built for and what runs it.
        """
        built, here = manifest.backend, self.describe()
        if built.get("version") != here["version"]:
            raise CompatibilityError(
                f"engine built for ONNX Runtime {built.get('version')}, running on "
                f"{here['version']}; rebuild the image or pin onnxruntime=={built.get('version')}"
            )
        built_cpu, here_cpu = built.get("cpu", {}), here["cpu"]
        if built_cpu.get("arch") != here_cpu["arch"]:
            raise CompatibilityError(
                f"engine built for {built_cpu.get('arch')}, running on {here_cpu['arch']}"
            )
        level = manifest.report.get("compile", {}).get("graph_optimization_level")
        missing = sorted(set(built_cpu.get("flags", [])) - set(here_cpu["flags"]))
        if level == "all" and missing:
            raise CompatibilityError(
                f"engine built for a CPU with {', '.join(missing)} ({built_cpu.get('model')}), "
                f"running on one without ({here_cpu['model']}); rebuild on this CPU class or "
                "set build.onnxruntime.graph_optimization_level: extended"
            )


def _to_ort(name: str, array: np.ndarray) -> np.ndarray:
    """KServe v2 BYTES arrive as object arrays of ``bytes``; ONNX Runtime's STRING tensors
    take ``str`` (it would ``str()`` a bytes element into ``"b'...'"``): decode as UTF-8.

    Raises:
        InputError: an element is not UTF-8 (names the input).
    """
    if array.dtype != object or not array.size:
        return array
    try:
        return np.vectorize(
            lambda item: item.decode() if isinstance(item, bytes) else item, otypes=[object]
        )(array)
    except UnicodeDecodeError as exc:
        raise InputError(
            f"input {name!r}: a BYTES element is not UTF-8 text ({exc.reason} at byte "
            f"{exc.start}); this engine's string tensors hold UTF-8"
        ) from exc


def _from_ort(array: np.ndarray) -> np.ndarray:
    """STRING outputs come back as ``str`` elements: encode them to the ``bytes`` that
    KServe v2 BYTES carry."""
    if array.dtype != object or not array.size:
        return array
    return np.vectorize(
        lambda item: item.encode() if isinstance(item, str) else item, otypes=[object]
    )(array)


def _cpuinfo() -> tuple[str, set[str]]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown", set()
    model, flags = "unknown", set[str]()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and model == "unknown":
            model = value.strip()
        elif key.strip() == "flags" and not flags:
            flags = set(value.split())
    return model, flags
