"""Engine back ends behind three small protocols, registered in one literal dict.

Each back end is one package (``backends/<name>/``) with three parts:

* **runtime** (:class:`Runtime`, in the server): load an engine, describe the host facts
  it is tied to, refuse one this host cannot run;
* **compiler** (:class:`Compiler`, in the builder stage): ONNX -> engine, its data files,
  its own latency timer if it has one;
* **build target** (:class:`BuildTarget`, on the host): what ``mmaas build`` needs to make
  its image (recipe, values, builder image, compile route, settings, labels, checks).

:data:`BACKENDS` names them as ``"module:attribute"``, imported only when asked for: the
server imports only the runtime part it serves, the builder stage only the compiler.
Adding a back end is its own package plus one entry here. The data the build-target
protocol passes (recipe, compile build, doctor's host checks) is in
:mod:`mmaas.backends.targets`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

from mmaas.backends.targets import CompileBuild, DockerHost, ImageRecipe, Readiness
from mmaas.core.errors import UsageError
from mmaas.core.manifest import Manifest, ModelInfo

if TYPE_CHECKING:  # host-side types of the build-target protocol (never imported at run time)
    from mmaas.build.plan import ContextFile
    from mmaas.spec.model import ModelSpec

# The back ends ``backend:`` accepts (the spec's Literal; tests/test_backend_registry.py
# checks that the registry lists the same names).
BackendName = Literal["onnxruntime", "tensorrt"]


@dataclass(frozen=True)
class Parts:
    """Where one back end's parts live, each as ``"module:attribute"``."""

    runtime: str
    compiler: str
    target: str


# name -> its parts; a plain dict, as pre-commit registers its languages.
BACKENDS: dict[str, Parts] = {
    "onnxruntime": Parts(
        "mmaas.backends.onnxruntime.runtime:OnnxRuntimeRuntime",
        "mmaas.backends.onnxruntime.compiler:OnnxRuntimeCompiler",
        "mmaas.backends.onnxruntime.target:OnnxRuntimeTarget",
    ),
    "tensorrt": Parts(
        "mmaas.backends.tensorrt.runtime:TensorRTRuntime",
        "mmaas.backends.tensorrt.compiler:TensorRTCompiler",
        "mmaas.backends.tensorrt.target:TensorRTTarget",
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
    """The compiler part: what the builder stage needs of a back end."""

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


class BuildTarget(Protocol):
    """The host side of a back end: how ``mmaas build`` makes its image.

    Attributes:
        name: the registry name.
        precisions: the ``target_precision`` values it builds.
        runs_on_gpu: its images are built and served on a GPU (CI runner choice).
        runtime_packages, builder_packages: the mmaas subpackages each image's wheel holds.
    """

    name: str
    precisions: tuple[str, ...]
    runs_on_gpu: bool
    runtime_packages: tuple[str, ...]
    builder_packages: tuple[str, ...]

    def recipe(self, spec: ModelSpec) -> ImageRecipe:
        """The template and the per-stage extras of ``spec``'s image."""
        ...

    def check_input(self, name: str) -> str | None:
        """Why this back end cannot take an input called ``name`` (e.g. a name trtexec
        cannot quote), or None; spec validation reports it at the input's key."""
        ...

    def engine_settings(self, spec: ModelSpec) -> Any:
        """The typed engine settings of ``spec`` (a frozen dataclass the compiler reads
        back): only what changes the engine."""
        ...

    def builder_image(self, spec: ModelSpec) -> str:
        """The image the builder stage starts from."""
        ...

    def pin(self, spec: ModelSpec) -> dict[str, str]:
        """``{"name", "version"}`` of the back end the builder stage runs."""
        ...

    def hardware_class(self, spec: ModelSpec) -> dict[str, Any]:
        """The class of machine an engine built here is tied to (for the engine-cache key)."""
        ...

    def template_values(self, spec: ModelSpec) -> dict[str, Any]:
        """Template values beyond the common ones. Raises SpecError for settings the
        target cannot build."""
        ...

    def engine_files(self, spec: ModelSpec, folder: Path) -> tuple[ContextFile, ...]:
        """Files of the model folder the compile reads beyond the ONNX file and samples."""
        ...

    def preflight(self, spec: ModelSpec, image: str) -> str | None:
        """Checks before any Docker work (a GPU); an extra image tag or None. BuildError."""
        ...

    def compile_engine(self, build: CompileBuild) -> Path:
        """Run the compile route and return the engine directory it wrote (unverified)."""
        ...

    def labels(self, manifest: Manifest) -> dict[str, str]:
        """Image labels from the built engine's manifest beyond the common ones."""
        ...

    def readiness(self, host: DockerHost) -> Readiness:
        """Its own checks of this host and whether its images build here (``doctor``)."""
        ...

    def build_commands(
        self,
        spec: ModelSpec,
        docker: list[str],
        build_args: Callable[[Path, str, str | None], list[str]],
        contexts: tuple[Path, Path],
        image: str,
        env: str,
    ) -> list[str]:
        """What ``mmaas build`` runs, one line each (``env`` prefixes a ``docker build``)."""
        ...


def get_runtime(name: str) -> Runtime:
    """The runtime part of back end ``name``.

    Raises:
        UsageError: ``name`` is not registered (lists the known names).
    """
    runtime: Runtime = _load(_parts(name).runtime)
    return runtime


def get_compiler(name: str) -> Compiler:
    """The compiler part of back end ``name``. Raises UsageError for an unknown name."""
    compiler: Compiler = _load(_parts(name).compiler)
    return compiler


def get_target(name: str) -> BuildTarget:
    """The build target of back end ``name``. Raises UsageError for an unknown name."""
    target: BuildTarget = _load(_parts(name).target)
    return target


def _parts(name: str) -> Parts:
    if name not in BACKENDS:
        raise UsageError(f"unknown backend {name!r}; known: {', '.join(sorted(BACKENDS))}")
    return BACKENDS[name]


def _load(target: str) -> Any:
    module_name, attribute = target.split(":")
    return getattr(importlib.import_module(module_name), attribute)()
