"""ONNX Runtime: the runtime part of the back end (load, describe, check_compatible).

load: the optimized model (written by :mod:`mmaas.backends.onnxruntime.builder`) is opened
with optimizations off (they are already applied), which also keeps start-up short. A GPU
engine (its directory holds :data:`EXECUTION_FILE`) opens a CUDA or TensorRT session
instead (:mod:`mmaas.backends.onnxruntime.runtime.gpu`: preflight, placement, CUDA graphs); the
builder stage's copy of this runtime (``build_check``) checks a GPU engine on the CPU
provider when no GPU is visible there (a ``docker build`` step sees none), and captures no
CUDA graphs. ``MMAAS_CUDA_GRAPHS=false`` turns the engine's CUDA graphs off at run time;
``MMAAS_TRT_CACHE_DIR`` is where the TensorRT provider keeps its engine and timing caches
(both rows of :mod:`mmaas.core.runtime_settings`). At
level ``all`` its layout transforms (NCHWc blocking) depend on the build CPU's vector
extensions, so the manifest records the CPU flags (:meth:`OnnxRuntimeRuntime.describe`)
and :meth:`OnnxRuntimeRuntime.check_compatible` refuses a host that lacks one of them.
"""

from __future__ import annotations

import json
import logging
import os
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mmaas.core.errors import CompatibilityError, InputError
from mmaas.core.manifest import Manifest
from mmaas.core.ort_io import (
    has_bfloat16,
    import_onnxruntime,
    refused_values,
    run_session,
    session_options,
)
from mmaas.core.runtime_settings import CUDA_GRAPHS, TRT_CACHE_DIR

if TYPE_CHECKING:
    import onnxruntime as ort
else:  # what onnxruntime prints at import goes to the debug log, not the console
    ort = import_onnxruntime()

ENGINE_FILE = "model.ort.onnx"
EXECUTION_FILE = "execution.json"  # a GPU engine's execution settings (compiler-written)
log = logging.getLogger("mmaas.server")
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
    """A loaded ONNX Runtime session (CPU execution provider). A session with a BF16 input
    or output runs through OrtValues (:mod:`mmaas.core.ort_io`)."""

    def __init__(self, session: ort.InferenceSession) -> None:
        self.session = session
        self.bfloat16 = has_bfloat16(session)

    def infer(
        self, inputs: Mapping[str, np.ndarray], outputs: Sequence[str]
    ) -> dict[str, np.ndarray]:
        """Run ``session.run`` once; returns ``{name: array}`` for the requested outputs.

        Raises:
            InputError: ONNX Runtime refused the inputs' values (INVALID_ARGUMENT), or a
                BYTES element is not UTF-8.
        """
        names = list(outputs)
        feeds = {name: _to_ort(name, array) for name, array in inputs.items()}
        with refused_values():
            values = run_session(self.session, names, feeds, bfloat16=self.bfloat16)
        return {name: _from_ort(value) for name, value in zip(names, values, strict=True)}

    def bind(self) -> Any:
        """In-place runs on this session, arrays in host memory
        (:class:`~mmaas.backends.onnxruntime.runtime.binding.OrtBoundEngine`)."""
        from mmaas.backends.onnxruntime.runtime.binding import OrtBoundEngine

        return OrtBoundEngine(self.session, "cpu")


class OnnxRuntimeRuntime:
    """The runtime part of the ONNX Runtime back end; see the module docstring."""

    name = "onnxruntime"
    platform = "onnxruntime_onnx"
    device_kind = "CPU"

    def __init__(self, build_check: bool = False) -> None:
        self.build_check = build_check

    def load(self, directory: Path, manifest: Manifest, threads: int = 0) -> Any:
        """Open ``directory/<engine>``. CPU: optimizations off and ``threads`` intra-op
        threads (0 = ONNX Runtime's default, one per core); with fewer threads than cores
        (several instances) the pool does not spin (``session.intra_op.allow_spinning``).
        GPU: :func:`mmaas.backends.onnxruntime.runtime.gpu.load_gpu` (``threads`` unused).

        Raises:
            CompatibilityError: a GPU engine whose GPU provider cannot start here.
        """
        if any(record.path == EXECUTION_FILE for record in manifest.engine_data):
            return self._load_gpu(directory, manifest, threads)
        return self._load_cpu(directory, manifest, threads)

    def _load_gpu(self, directory: Path, manifest: Manifest, threads: int) -> Any:
        from mmaas.backends.onnxruntime.runtime.gpu import load_gpu
        from mmaas.backends.onnxruntime.runtime.settings import GpuSettings

        recorded = json.loads((directory / EXECUTION_FILE).read_text())
        gpu = GpuSettings.from_json(recorded["gpu"])
        path = directory / manifest.engine.path
        cache = TRT_CACHE_DIR.read(os.environ)
        graphs = not self.build_check and CUDA_GRAPHS.read(os.environ)
        try:
            return load_gpu(
                path,
                manifest.model,
                gpu,
                graphs=graphs,
                cache_dir=cache,
                pinned=not self.build_check,
            )
        except CompatibilityError as exc:
            if not self.build_check:
                raise
            log.warning("checking the GPU engine on the CPU provider: %s", exc.message)
            return self._load_cpu(directory, manifest, threads, optimize=True)

    def _load_cpu(
        self, directory: Path, manifest: Manifest, threads: int, optimize: bool = False
    ) -> OnnxRuntimeEngine:
        options = session_options(ort)  # errors reach the caller as exceptions, once
        options.graph_optimization_level = (
            ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            if optimize  # a GPU engine's graph is only basic-optimized
            else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        )
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
