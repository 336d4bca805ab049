"""TensorRT (NVIDIA GPUs): the host part of the back end, its build target (what ``mmaas
validate``, ``render``, ``build`` and ``doctor`` need on the host).

The builder stage starts from ``build.tensorrt.builder_image`` (NVIDIA's TensorRT image);
the compile takes the GPU route (:mod:`mmaas.backends.tensorrt.host.gpu_route`: ``docker
build --target builder``, then ``docker run --gpus all`` of it), because a build step sees
no GPU. A missing GPU is reported before any Docker work (C11); the image gets the
engine's TensorRT, CUDA, driver and GPU labels (C12) and, with ``build.tensorrt.
gpu_targets``, the ``repo:tag-smNN`` tag of the target it was built on. Template values
and their checks: :mod:`mmaas.backends.tensorrt.host.image`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mmaas.backends.targets import (
    BuildCommand,
    CompileBuild,
    ContextFile,
    DockerHost,
    ImageRecipe,
    Readiness,
)
from mmaas.backends.tensorrt.builder.settings import TensorRTSettings
from mmaas.backends.tensorrt.builder.timing_cache import TimingCacheStore
from mmaas.backends.tensorrt.builder.trtexec.command import (
    FP16_ONNX,
    STAGED_MODEL_DIR,
    compile_argv,
    converts_to_fp16,
)
from mmaas.backends.tensorrt.builder.trtexec.network import network_inputs
from mmaas.backends.tensorrt.host.doctor import tensorrt_readiness
from mmaas.backends.tensorrt.host.gpu_route import (
    compile_on_gpu,
    gpu_build_commands,
    require_gpu,
    target_tag,
    tensorrt_labels,
)
from mmaas.backends.tensorrt.host.image import tensorrt_plan_values
from mmaas.backends.tensorrt.runtime.bindings import KSERVE_BY_TRT
from mmaas.backends.tensorrt.runtime.releases import parse_version
from mmaas.core.errors import UsageError
from mmaas.core.manifest import Manifest
from mmaas.core.profile import quotable
from mmaas.spec.engines import model_info
from mmaas.spec.model import ModelSpec


class TensorRTTarget:
    """The build target of the GPU back end; see the module docstring."""

    name = "tensorrt"
    precisions = ("fp32", "tf32", "fp16", "bf16", "int8", "fp8")
    runs_on_gpu = True
    runtime_packages = ("mmaas.core", "mmaas.server", "mmaas.backends.tensorrt.runtime")
    builder_packages = (
        "mmaas.core",
        "mmaas.stage",
        "mmaas.backends.tensorrt.builder",
        "mmaas.backends.tensorrt.runtime",
    )

    def recipe(self, spec: ModelSpec) -> ImageRecipe:
        """The GPU template; runtime: the server only (TensorRT and cuda-python come from
        the builder image's release, pinned per build by the template); builder: the
        TensorRT compiler's extras and ONNX Runtime (the accuracy gate's reference)."""
        return ImageRecipe("Dockerfile.tensorrt.j2", ("server",), ("onnxruntime", "tensorrt"))

    def check_input(self, name: str) -> str | None:
        """A name trtexec's shape flags cannot quote (``'`` or ``,``; C1)."""
        if quotable(name):
            return None
        return (
            "trtexec cannot express a name containing ' or , in its shape flags; rename "
            "the input when exporting the ONNX model"
        )

    def check_spec(self, spec: ModelSpec) -> list[tuple[tuple[str | int, ...], str]]:
        """Nothing beyond the precision and input-name checks."""
        return []

    def check_datatype(self, spec: ModelSpec, datatype: str) -> str | None:
        """TensorRT binds only FP32, FP16, BF16, INT8, INT32, INT64, UINT8 and BOOL
        (``trt.DataType``; an ONNX INT64 may be bound as INT32, checked per request), and
        BF16 I/O only from TensorRT 10 on (``build.tensorrt.version``)."""
        if datatype not in KSERVE_BY_TRT.values():
            return (
                f"TensorRT has no {datatype} tensors (it binds "
                f"{', '.join(sorted(set(KSERVE_BY_TRT.values())))}); export it as one of "
                "those or use backend: onnxruntime"
            )
        version = spec.build.tensorrt.version
        if datatype == "BF16" and parse_version(version)[:1] < (10,):
            return (
                f"TensorRT {version} (build.tensorrt.version) has no BF16 inputs or outputs; "
                "build with TensorRT 10 or newer, export it as FP16/FP32, or use "
                "backend: onnxruntime"
            )
        return None

    def engine_settings(self, spec: ModelSpec) -> TensorRTSettings:
        """``build.workspace``, ``build.timing_cache`` and ``build.tensorrt`` without the
        host-side image choices (runtime image, GPU targets)."""
        trt = spec.build.tensorrt
        return TensorRTSettings(
            version=trt.version,
            workspace_mib=spec.build.workspace,
            timing_cache=spec.build.timing_cache,
            builder_optimization_level=trt.builder_optimization_level,
            hardware_compatibility_level=trt.hardware_compatibility_level,
            version_compatible=trt.version_compatible,
            timing_run=trt.timing_run,
            timing_cache_verify=trt.timing_cache_verify,
            calibration_cache=trt.calibration_cache,
            tolerance_atol=trt.tolerance_atol,
            tolerance_rtol=trt.tolerance_rtol,
        )

    def builder_image(self, spec: ModelSpec) -> str:
        """``build.tensorrt.builder_image``."""
        return spec.build.tensorrt.builder_image

    def pin(self, spec: ModelSpec) -> dict[str, str]:
        """``build.tensorrt.version``."""
        return {"name": self.name, "version": spec.build.tensorrt.version}

    def hardware_class(self, spec: ModelSpec) -> dict[str, Any]:
        """``{"compute_capability"}`` of this host's first GPU (``"none"`` without one)."""
        from mmaas.backends.tensorrt.runtime.gpu import query_gpus

        gpus = query_gpus().gpus
        return {"compute_capability": gpus[0].compute_capability if gpus else "none"}

    def template_values(self, spec: ModelSpec) -> dict[str, Any]:
        """See :func:`mmaas.backends.tensorrt.host.image.tensorrt_plan_values` (raises
        SpecError)."""
        return tensorrt_plan_values(spec)

    def engine_files(self, spec: ModelSpec, folder: Path) -> tuple[ContextFile, ...]:
        """The INT8 calibration cache (``model/<build.tensorrt.calibration_cache>``, beside
        the ONNX file, where the compiler looks for it)."""
        calibration = spec.build.tensorrt.calibration_cache
        return (ContextFile(folder / calibration, f"model/{calibration}"),) if calibration else ()

    def preflight(self, spec: ModelSpec, image: str) -> str | None:
        """A GPU (of a listed target) before any Docker work (C11); the per-target tag."""
        return target_tag(image, require_gpu(), spec.build.tensorrt.gpu_targets)

    def compile_engine(self, build: CompileBuild) -> Path:
        """The GPU route: the builder stage, then its compile in ``docker run --gpus all``."""
        return compile_on_gpu(build, build.work / "out")

    def labels(self, manifest: Manifest) -> dict[str, str]:
        """The facts a host needs to run the engine (C12)."""
        return tensorrt_labels(manifest)

    def readiness(self, host: DockerHost) -> Readiness:
        """GPUs, the NVIDIA container runtime, TensorRT on the host
        (:func:`mmaas.backends.tensorrt.host.doctor.tensorrt_readiness`)."""
        return tensorrt_readiness(host)

    def engine_command(self, spec: ModelSpec, source: Path, spec_file: str) -> list[str]:
        """trtexec's argv as the compile container runs it
        (:func:`~mmaas.backends.tensorrt.builder.trtexec.command.compile_argv`): shapes for every
        input ``source`` (the ONNX file) leaves dynamic, the flags of the pinned release.

        Raises:
            SpecError: every setting that release refuses, in ``spec_file``.
        """
        from mmaas.backends.tensorrt.builder.precision import has_qdq

        settings = self.engine_settings(spec)
        try:
            converted = converts_to_fp16(spec.target_precision, settings.version)
        except UsageError:  # a malformed version: compile_argv says so at its key
            converted = False
        quantized = spec.target_precision in ("int8", "fp8") and has_qdq(source)
        return compile_argv(
            model_info(spec),
            settings,
            settings.version,
            network_inputs(source),
            onnx=FP16_ONNX if converted else f"{STAGED_MODEL_DIR}/{source.name}",
            typed_graph=converted or quantized,
            spec_file=spec_file,
        )

    def build_commands(
        self,
        spec: ModelSpec,
        docker: list[str],
        build_args: Callable[[Path, str, str | None], list[str]],
        contexts: tuple[Path, Path],
        image: str,
        env: Mapping[str, str],
    ) -> list[BuildCommand]:
        """The GPU route's command sequence (:func:`gpu_build_commands`)."""
        tags = (f"{spec.image_repository}:{spec.image_tag}-builder", image)
        out = contexts[0].parent / "out"
        return gpu_build_commands(
            docker, build_args, contexts, tags, out, TimingCacheStore().root, env
        )
