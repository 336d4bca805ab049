"""Engine back ends behind three small protocols, registered in one literal dict.

Each back end is one package (``backends/<name>/``) with three subpackages, one per place
its code runs; each subpackage's ``__init__`` holds the part's protocol class:

* **runtime** (:class:`Runtime`, in the image's server): load an engine, describe the host
  facts it is tied to, refuse one this host cannot run;
* **builder** (:class:`Compiler`, in the builder stage): ONNX -> engine, its data files,
  its own latency timer if it has one;
* **host** (:class:`~mmaas.backends.targets.BuildTarget`, on the host): what ``mmaas
  validate``, ``render``, ``build`` and ``doctor`` need (checks, recipe, values, builder
  image, compile route, settings, labels, readiness); that protocol and the data it passes
  are in :mod:`mmaas.backends.targets`.

Each part imports only the parts below it: the host part imports the spec, the builder
and the runtime parts (never ``mmaas.build``, which calls it), the builder part the
runtime part, the runtime part only :mod:`mmaas.core`; shared pure pieces (typed engine
settings) sit in the lowest part that needs them. This module imports only
:mod:`mmaas.core` (pyproject.toml's import contracts state the order).

:data:`BACKENDS` names the parts as ``"module:attribute"``, imported only when asked for:
the server imports only the runtime part it serves, the builder stage only the builder
part. Adding a back end is its own package plus one entry here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import numpy as np

from mmaas.core.errors import UsageError
from mmaas.core.manifest import Manifest, ModelInfo

if TYPE_CHECKING:  # the host-side protocol (never imported at run time: not in image wheels)
    from mmaas.backends.targets import BuildTarget

# The back ends ``backend:`` accepts (the spec's Literal; tests/test_backend_registry.py
# checks that the registry lists the same names).
BackendName = Literal["onnxruntime", "tensorrt"]


@dataclass(frozen=True)
class Parts:
    """Where one back end's parts live, each as ``"module:attribute"``: its runtime part's
    :class:`Runtime`, its builder part's :class:`Compiler`, its host part's build target."""

    runtime: str
    compiler: str
    target: str


# name -> its parts; a plain dict, as pre-commit registers its languages.
BACKENDS: dict[str, Parts] = {
    "onnxruntime": Parts(
        "mmaas.backends.onnxruntime.runtime:OnnxRuntimeRuntime",
        "mmaas.backends.onnxruntime.builder:OnnxRuntimeCompiler",
        "mmaas.backends.onnxruntime.host:OnnxRuntimeTarget",
    ),
    "tensorrt": Parts(
        "mmaas.backends.tensorrt.runtime:TensorRTRuntime",
        "mmaas.backends.tensorrt.builder:TensorRTCompiler",
        "mmaas.backends.tensorrt.host:TensorRTTarget",
    ),
}

# (shapes, runs, warmup) -> {"p50_ms", "p90_ms", "p99_ms", "mean_ms", "max_ms", "timer"}
LatencyProbe = Callable[[Mapping[str, tuple[int, ...]], int, int], Mapping[str, Any]]


@dataclass(frozen=True)
class CompileRequest:
    """Everything a compiler needs, as the builder stage reads it from the build request.
    Attributes:
        model: the served model's tensors, profile and precision.
        source: the ONNX file.
        out_dir: where the engine (and any side files) go.
        settings: the back end's own typed engine settings (e.g. ``TensorRTSettings``),
            made by its build target, read back by its compiler.
        cache_dir: a persisted directory for timing caches, or None.
    """

    model: ModelInfo
    source: Path
    out_dir: Path
    settings: Any = None
    cache_dir: Path | None = None


@dataclass(frozen=True)
class CompileResult:
    """What a compile produced.
    Attributes:
        engine_file: the engine's file name inside ``out_dir``.
        command: the argv (or API call, as text) that built it, for the manifest.
        report: the back end's build report (timings in ms, tool output summary).
        model: the signature the engine really has, when it differs from the request's
            (TensorRT binds an ONNX INT64 input as INT32): the manifest, and so
            ModelMetadata, records it; None = the request's.
    """

    engine_file: str
    command: Sequence[str]
    report: Mapping[str, Any] = field(default_factory=dict)
    model: ModelInfo | None = None


class Engine(Protocol):
    """A loaded engine, safe to call from one thread at a time."""

    def infer(self, inputs: Mapping[str, np.ndarray], outputs: Sequence[str]) -> dict[str, Any]:
        """Run once. ``inputs``: every input's array (its datatype, a shape inside the
        profile); returns the named ``outputs`` as numpy arrays."""
        ...


@dataclass(frozen=True)
class Device:
    """Where an engine instance runs: Triton's instance group ``kind`` (``CPU``, ``GPU``)
    and, for ``GPU``, the indices of the GPUs it uses among those visible (``gpus``)."""

    kind: str
    gpus: tuple[int, ...] = ()


@dataclass(frozen=True)
class Batch:
    """What a :class:`BatchingEngine` returns for one batch: each request's outputs (in
    request order) and the time spent copying inputs in, running, and copying outputs out
    (ns: Triton's compute input / infer / output)."""

    outputs: list[dict[str, Any]]
    input_ns: int = 0
    infer_ns: int = 0
    output_ns: int = 0


@runtime_checkable
class BatchingEngine(Protocol):
    """An engine that stacks a batch of requests itself, where its memory is (e.g. straight
    into device buffers), and may take inputs already in device memory.

    Attributes:
        executor: the thread its calls must run on (the batcher submits there directly).
        device_inputs: whether it takes :class:`~mmaas.core.cuda.DeviceArray` inputs in
            place (its outputs for such a request stay in device memory too).
        runs_on: where it runs (Triton's instance group).
    """

    executor: Executor
    device_inputs: bool
    runs_on: Device

    def infer(self, inputs: Mapping[str, Any], outputs: Sequence[str]) -> dict[str, Any]:
        """One request, as :meth:`Engine.infer`."""
        ...

    def infer_batch(self, parts: Sequence[Mapping[str, Any]], outputs: Sequence[str]) -> Batch:
        """Run ``parts`` (requests whose inputs match in every dim but axis 0) as one batch;
        each part's named ``outputs``."""
        ...


class Runtime(Protocol):
    """The runtime part: what the server needs of a back end.

    Attributes:
        name: the registry name (``manifest.model.backend``).
        platform: Triton's ``platform`` (``onnxruntime_onnx``, ``tensorrt_plan``).
        device_kind: Triton's instance group kind, ``"CPU"`` or ``"GPU"``.
    """

    name: str
    platform: str
    device_kind: str

    def load(self, directory: Path, manifest: Manifest, threads: int = 0) -> Engine:
        """Load the engine named by ``manifest`` from ``directory``. ``threads`` is the
        intra-op thread count (0 = the back end's default)."""
        ...

    def describe(self) -> dict[str, Any]:
        """The back end's version and the host facts an engine is tied to (CPU flags; GPU,
        compute capability, driver, CUDA and TensorRT versions)."""
        ...

    def check_compatible(self, manifest: Manifest) -> None:
        """Raise :class:`~mmaas.core.errors.CompatibilityError` when this host cannot run
        an engine built as ``manifest.backend`` records, naming what was built for what."""
        ...


class Compiler(Protocol):
    """The builder part's compiler: what the builder stage needs of a back end."""

    name: str
    runtime: Runtime

    def read_settings(self, data: Mapping[str, Any]) -> Any:
        """The back end's typed engine settings from their JSON form in the build request
        (the same type its build target wrote). Raises KeyError/TypeError when malformed."""
        ...

    def compile(self, request: CompileRequest) -> CompileResult:
        """Compile ``request.source`` into an engine in ``request.out_dir``.

        Raises:
            BuildError: the tool failed; the message says why.
        """
        ...

    def data_files(self, directory: Path) -> tuple[str, ...]:
        """The files beside the engine that it loads (recorded as ``engine_data``), in
        ``directory`` after :meth:`compile`; ``()`` for a self-contained engine."""
        ...

    def latency_probe(self, directory: Path, manifest: Manifest) -> LatencyProbe | None:
        """The back end's own timer for the latency gate (e.g. trtexec's), or None for wall
        time around :meth:`Engine.infer`."""
        ...


def get_runtime(name: str) -> Runtime:
    """The runtime part of back end ``name``.

    Raises:
        UsageError: ``name`` is not registered (lists the known names).
    """
    runtime: Runtime = _load(_parts(name).runtime)
    return runtime


def get_compiler(name: str) -> Compiler:
    """The compiler of back end ``name``'s builder part. Raises UsageError for an unknown
    name."""
    compiler: Compiler = _load(_parts(name).compiler)
    return compiler


def get_target(name: str) -> BuildTarget:
    """The build target of back end ``name``'s host part. Raises UsageError for an unknown
    name."""
    target: BuildTarget = _load(_parts(name).target)
    return target


def _parts(name: str) -> Parts:
    if name not in BACKENDS:
        raise UsageError(f"unknown backend {name!r}; known: {', '.join(sorted(BACKENDS))}")
    return BACKENDS[name]


def _load(target: str) -> Any:
    module_name, attribute = target.split(":")
    return getattr(importlib.import_module(module_name), attribute)()
