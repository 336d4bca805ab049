"""Engine back ends behind one small protocol, registered in a literal dict.

A back end compiles an ONNX model into an engine inside the builder stage
(:meth:`Backend.compile`), loads it in the runtime server (:meth:`Backend.load`),
and describes the host facts an engine is tied to (:meth:`Backend.describe`), which
the manifest records and :meth:`Backend.check_compatible` compares at start-up.
Implementations are imported lazily so that the CPU image never imports TensorRT.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from mmaas.core.errors import UsageError
from mmaas.core.manifest import Manifest, ModelInfo

# name -> "module:Class"; a plain dict, as pre-commit registers its languages.
BACKENDS: dict[str, str] = {
    "onnxruntime": "mmaas.backends.onnxruntime.backend:OnnxRuntimeBackend",
    "tensorrt": "mmaas.backends.tensorrt.backend:TensorRTBackend",
}


@dataclass(frozen=True)
class CompileRequest:
    """Everything a back end needs to compile, as the build plan serialises it.

    Attributes:
        model: the served model's tensors, profile and precision.
        source: the ONNX file.
        out_dir: where the engine (and any side files) go.
        settings: back-end settings from ``build`` in model.yaml (``workspace`` in MiB,
            ``timing_cache``, and the ``tensorrt`` / ``onnxruntime`` sub-sections).
        cache_dir: a persisted directory for timing caches, or None.
    """

    model: ModelInfo
    source: Path
    out_dir: Path
    settings: Mapping[str, Any] = field(default_factory=dict)
    cache_dir: Path | None = None


@dataclass(frozen=True)
class CompileResult:
    """What a compile produced.

    Attributes:
        engine_file: the engine's file name inside ``out_dir``.
        command: the argv (or API call, as text) that built it, for the manifest.
        report: back-end specific build report (timings in ms, tool output summary).
    """

    engine_file: str
    command: Sequence[str]
    report: Mapping[str, Any] = field(default_factory=dict)


class Engine(Protocol):
    """A loaded engine, safe to call from one thread at a time."""

    def infer(
        self, inputs: Mapping[str, np.ndarray], outputs: Sequence[str]
    ) -> dict[str, np.ndarray]:
        """Run once. ``inputs`` maps every input name to an array of its datatype and a
        shape inside the profile; returns the named ``outputs`` as arrays."""
        ...


class Backend(Protocol):
    """One engine technology (ONNX Runtime on CPU, TensorRT on NVIDIA GPUs)."""

    name: str

    def compile(self, request: CompileRequest) -> CompileResult:
        """Compile ``request.source`` into an engine in ``request.out_dir``.

        Raises:
            BuildError: the tool failed; the message says why.
        """
        ...

    def load(self, directory: Path, manifest: Manifest, threads: int = 0) -> Engine:
        """Load the engine named by ``manifest`` from ``directory``. ``threads`` is the
        intra-op thread count (0 = the back end's default)."""
        ...

    def describe(self) -> dict[str, Any]:
        """The back end's version and the host facts an engine is tied to (CPU flags, or
        GPU name, compute capability, driver, CUDA and TensorRT versions)."""
        ...

    def check_compatible(self, manifest: Manifest) -> None:
        """Raise :class:`~mmaas.core.errors.CompatibilityError` when this host cannot run an
        engine built as ``manifest.backend`` records, naming what was built for what."""
        ...


def get_backend(name: str) -> Backend:
    """Instantiate the back end registered as ``name``.

    Raises:
        UsageError: ``name`` is not registered (lists the known names).
    """
    try:
        target = BACKENDS[name]
    except KeyError as exc:
        raise UsageError(f"unknown backend {name!r}; known: {', '.join(sorted(BACKENDS))}") from exc
    module_name, class_name = target.split(":")
    backend: Backend = getattr(importlib.import_module(module_name), class_name)()
    return backend
