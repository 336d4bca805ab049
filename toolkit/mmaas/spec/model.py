"""The typed model spec: what a user writes in ``model.yaml``.

Frozen pydantic models, unknown keys forbidden, strict types (``version: 1.10`` is a
number, not the string "1.10", and is refused; ``timing_cache: off`` is a string, not a
boolean, and is refused). Field-level rules live here; rules that span fields or need
the ONNX graph live in :mod:`mmaas.spec.load`, which reports every problem with its
file, line and key path. The JSON Schema in ``schema/model.schema.json`` is generated
from :class:`ModelSpec`.

Shapes are full tensor shapes including the batch axis, as trtexec's
``--minShapes/--optShapes/--maxShapes`` take them; when ``max_batch_size > 0`` axis 0 is
the batch axis (Triton's convention).
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import Field

from mmaas.backends import BackendName as Backend
from mmaas.core.hashing import bytes_digest
from mmaas.spec.base import Strict
from mmaas.spec.deploy import DeploySpec
from mmaas.spec.gates import ChecksSpec
from mmaas.spec.parts import Asset, PartName, PipelineSpec
from mmaas.spec.runtime import RuntimeSpec
from mmaas.spec.shapes import ProfileShape

Precision = Literal["fp32", "tf32", "fp16", "bf16", "int8", "fp8"]
# KServe v2 tensor datatypes (kserve/open-inference-protocol, "Tensor Data Types").
Datatype = Literal[
    "BOOL",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "FP16",
    "FP32",
    "FP64",
    "BF16",
    "BYTES",
]

NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,127}$"

# The image reference grammar of distribution/reference (what `docker tag` accepts):
# an optional registry host[:port], then lowercase path components; tags as Docker's.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
REPOSITORY_PATTERN = rf"^(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?{_COMPONENT}(?:/{_COMPONENT})*$"
TAG_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"


class SourceSpec(Strict):
    """Where the ONNX model comes from: a ``path`` relative to the model folder, or an
    ``https`` ``url`` pinned by ``sha256`` or ``blake3`` (hex). A path may be pinned too."""

    path: str | None = None
    url: str | None = None
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None = None
    blake3: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None = None


class TensorSpec(Strict):
    """A tensor as the ONNX graph declares it. ``datatype`` and ``shape`` are filled from
    the ONNX model when absent; ``shape`` uses ``-1`` for every dynamic dim."""

    name: Annotated[str, Field(min_length=1)]
    datatype: Datatype | None = None
    shape: list[int] | None = None


SampleScalar = bool | int | float | str


class SampleRangeSpec(Strict):
    """``sample_values: {min: 2, max: 400}``: values drawn uniformly in min..max (both
    included for integer inputs)."""

    min: int | float
    max: int | float


class SampleArraySpec(Strict):
    """What a ``sample_values`` file completes to (written by mmaas, not by hand): the
    file's name in the model folder and its array (shape, row-major data)."""

    file: str
    shape: list[int]
    data: list[SampleScalar]


# a constant | a list of allowed values | {min, max} | a .npy/.npz file in the model folder
SampleValuesSpec = SampleScalar | list[SampleScalar] | SampleRangeSpec | SampleArraySpec


class InputSpec(TensorSpec):
    """A model input and its optimization profile (trtexec ``--minShapes/--optShapes/
    --maxShapes``). Required when the input has a dynamic dim; optional for static inputs,
    where min = opt = max = shape.

    ``sample_values``: what the build's profile check, the accuracy and latency gates and
    the server's warm-up feed this input instead of random data (integers 0..7, floats in
    [0, 1)): a constant (``16000``), a list of allowed values (``[0, 3, 7]``), a range
    (``{min: 2, max: 400}``), or the name of a ``.npy`` file (or ``.npz`` holding an array
    named after the input) in the model folder, as text (``values/lengths.npy``). A BYTES
    constant is a one-entry list (``["hello"]``)."""

    min: ProfileShape | None = None
    opt: ProfileShape | None = None
    max: ProfileShape | None = None
    sample_values: SampleValuesSpec | None = None


class OutputSpec(TensorSpec):
    """A model output (read by name; KServe v2 ``outputs`` of ModelMetadata)."""


class TensorRTSpec(Strict):
    """TensorRT builder settings (trtexec flags); used when ``backend: tensorrt``.

    ``timing_run``: trtexec times the engine after building it (the performance summary
    goes into the build report); false adds ``--skipInference``. ``timing_cache_verify``
    adds ``--errorOnTimingCacheMiss`` (TensorRT 10+): the build fails unless every tactic
    came from the persisted timing cache. ``calibration_cache``: an INT8 calibration cache
    (``--calib``), relative to the model folder. ``tolerance_atol`` / ``tolerance_rtol``:
    how far the engine's outputs may be from ONNX Runtime's (``numpy.allclose``) in the
    accuracy check.
    """

    version: str = "10.13"
    builder_image: str = "nvcr.io/nvidia/tensorrt:25.08-py3"
    # The 25.08 TensorRT container is built on CUDA 13.0.0: the runtime base must match.
    runtime_image: str = "nvcr.io/nvidia/cuda:13.0.0-runtime-ubuntu24.04"
    builder_optimization_level: Annotated[int, Field(ge=0, le=5)] = 3
    hardware_compatibility_level: Literal["none", "ampere+", "same_compute_capability"] = "none"
    version_compatible: bool = False
    gpu_targets: list[str] = Field(default_factory=list)
    timing_run: bool = True
    timing_cache_verify: bool = False
    calibration_cache: str | None = None
    tolerance_atol: Annotated[float, Field(ge=0)] = 0.02
    tolerance_rtol: Annotated[float, Field(ge=0)] = 0.02


class OnnxRuntimeSpec(Strict):
    """ONNX Runtime settings. ``graph_optimization_level``: the offline graph optimization
    (``SessionOptions.graph_optimization_level``; on CPU ``all`` adds layout transforms tied
    to the CPU's instruction set, recorded in the manifest; on GPU the offline pass is
    ``basic``, which is provider-independent, and the rest runs when the GPU session loads).

    ``device``: where the instances run, Triton's ``instance_group.kind`` (``cpu`` =
    KIND_CPU, ``gpu`` = KIND_GPU: the image installs onnxruntime-gpu and the CUDA/cuDNN
    wheels). ``execution_accelerator`` (GPU only): Triton's ``gpu_execution_accelerator``,
    ``cuda`` (the default) or ``tensorrt`` (its engine and timing caches follow
    ``build.timing_cache`` and the profile). ``cuda_graphs``: Triton's
    ``optimization.cuda.graphs``: one CUDA graph per shape of ``cuda_graph_shapes``
    (default: the opt shapes at the opt batch, each preferred batch size and, with dynamic
    batching, max_batch_size), captured at start-up; other shapes run without a graph.
    ``cudnn_conv_algo_search``: ``exhaustive`` (fastest kernels, slowest start-up),
    ``heuristic`` or ``default``. ``allow_cpu_fallback``: serve on the CPU provider when
    CUDA cannot start, instead of refusing to become ready (C34)."""

    graph_optimization_level: Literal["basic", "extended", "all"] = "all"
    device: Literal["cpu", "gpu"] = "cpu"
    execution_accelerator: Literal["cuda", "tensorrt"] | None = None
    cuda_graphs: bool = False
    cuda_graph_shapes: list[dict[str, ProfileShape]] = Field(default_factory=list)
    cudnn_conv_algo_search: Literal["exhaustive", "heuristic", "default"] = "exhaustive"
    allow_cpu_fallback: bool = False


class BuildSpec(Strict):
    """Engine build settings. ``workspace`` is TensorRT's workspace memory pool in MiB
    (``--memPoolSize=workspace:<N>M``); ``timing_cache`` persists tactic timings."""

    workspace: Annotated[int, Field(gt=0)] = 2048
    timing_cache: bool = True
    tensorrt: TensorRTSpec = Field(default_factory=TensorRTSpec)
    onnxruntime: OnnxRuntimeSpec = Field(default_factory=OnnxRuntimeSpec)


class ImageSpec(Strict):
    """The image: ``repository`` defaults to ``mmaas/<name>`` and ``tag`` to the version.
    ``base_image`` is the local or registry image both CPU stages start from;
    ``ca_bundle`` a PEM file (path relative to the model folder or absolute) trusted by pip
    inside the build, for TLS-intercepting proxies."""

    repository: Annotated[str, Field(pattern=REPOSITORY_PATTERN)] | None = None
    tag: Annotated[str, Field(pattern=TAG_PATTERN)] | None = None
    base_image: str = "mmaas/base:bookworm"
    ca_bundle: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)


class EngineSpec(Strict):
    """One engine of a multi-engine model (``engines.<name>``): its own ONNX source, back
    end, precision, batching, tensors with their optimization profile, build settings and
    gates -- the same keys, with the same meaning, as a single-engine model.yaml's top
    level."""

    source: SourceSpec
    backend: Backend = "onnxruntime"
    target_precision: Precision = "fp32"
    max_batch_size: Annotated[int, Field(ge=0)] = 0
    inputs: list[InputSpec] = Field(default_factory=list)
    outputs: list[OutputSpec] = Field(default_factory=list)
    build: BuildSpec = Field(default_factory=BuildSpec)
    checks: ChecksSpec = Field(default_factory=ChecksSpec)


ENGINE_KEYS = tuple(EngineSpec.model_fields)


class ModelSpec(Strict):
    """A whole ``model.yaml``. ``max_batch_size`` 0 means the model does not batch (no
    batch axis semantics); above 0, axis 0 of every input is the batch axis and its profile
    max must equal ``max_batch_size``.

    A single-engine model writes its engine's keys (``source``, ``backend``... ``checks``)
    at the top; a multi-engine one lists them per engine under ``engines:`` instead (the
    top-level engine keys then stay unset). ``assets`` and ``pipeline`` work with both.
    """

    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    version: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")]
    description: str = ""
    source: SourceSpec | None = None
    backend: Backend = "onnxruntime"
    target_precision: Precision = "fp32"
    max_batch_size: Annotated[int, Field(ge=0)] = 0
    inputs: list[InputSpec] = Field(default_factory=list)
    outputs: list[OutputSpec] = Field(default_factory=list)
    build: BuildSpec = Field(default_factory=BuildSpec)
    checks: ChecksSpec = Field(default_factory=ChecksSpec)
    engines: dict[PartName, EngineSpec] | None = None
    assets: dict[PartName, Asset] = Field(default_factory=dict)
    pipeline: PipelineSpec | None = None
    runtime: RuntimeSpec = Field(default_factory=RuntimeSpec)
    image: ImageSpec = Field(default_factory=ImageSpec)
    deploy: DeploySpec = Field(default_factory=DeploySpec)

    def digest(self) -> str:
        """sha256 of the canonical JSON of the whole (completed) spec: ``sha256:<hex>``.
        ``engines``, ``assets`` and ``pipeline`` count only when given, so a single-engine
        spec keeps the digest it had before they existed."""
        unused = {key for key in ("engines", "assets", "pipeline") if not getattr(self, key)}
        data = self.model_dump(mode="json", exclude=unused)
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return bytes_digest(text.encode())

    @property
    def image_repository(self) -> str:
        """``image.repository`` or ``mmaas/<name>``."""
        return self.image.repository or f"mmaas/{self.name}"

    @property
    def image_tag(self) -> str:
        """``image.tag`` or the model version."""
        return self.image.tag or self.version
