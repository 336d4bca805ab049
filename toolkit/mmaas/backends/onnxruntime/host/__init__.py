"""ONNX Runtime (CPU or GPU): the host part of the back end, its build target (what
``mmaas validate``, ``render``, ``build`` and ``doctor`` need on the host).

The builder stage starts from ``image.base_image`` and compiles inside ``docker build``
(the compile build's builder stage, ``templates/Dockerfile.onnxruntime.j2``, or
``Dockerfile.onnxruntime-gpu.j2`` for ``build.onnxruntime.device: gpu``: onnxruntime-gpu in
both stages, the CUDA/cuDNN wheels in the runtime stage; no GPU is needed to build); the
engine directory is then copied out of that image. ONNX Runtime's version is the pin of the
image constraints (``templates/image-constraints.txt``), so the engine is compiled and
served by one release.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mmaas.backends.onnxruntime.host.gpu_spec import check_gpu_spec, gpu_settings
from mmaas.backends.onnxruntime.runtime import OnnxRuntimeRuntime
from mmaas.backends.onnxruntime.runtime.settings import OnnxRuntimeSettings
from mmaas.backends.targets import (
    ENGINE_CONTEXT,
    ENGINE_DIR,
    BuildCommand,
    CompileBuild,
    ContextFile,
    DockerHost,
    HostCheck,
    ImageRecipe,
    Readiness,
)
from mmaas.core.manifest import Manifest
from mmaas.core.templates import pinned_version
from mmaas.spec.model import ModelSpec
from mmaas.spec.yamlio import KeyPath

# The CUDA 13 / cuDNN 9 wheels the GPU image's runtime stage installs (pinned in the
# image constraints to the versions verified with onnxruntime-gpu on the H200, driver 580).
GPU_LIBRARIES = ("nvidia-cuda-runtime", "nvidia-cudnn-cu13", "nvidia-cublas", "nvidia-curand")


class OnnxRuntimeTarget:
    """The build target of the ONNX Runtime back end; see the module docstring."""

    name = "onnxruntime"
    precisions = ("fp32", "tf32", "fp16", "bf16", "int8")  # per device: gpu_spec.PRECISIONS
    runs_on_gpu = False
    runtime_packages = ("mmaas.core", "mmaas.server", "mmaas.backends.onnxruntime.runtime")
    builder_packages = (
        "mmaas.core",
        "mmaas.stage",
        "mmaas.backends.onnxruntime.builder",
        "mmaas.backends.onnxruntime.runtime",
    )

    def recipe(self, spec: ModelSpec) -> ImageRecipe:
        """CPU: the CPU template; runtime: the server and ONNX Runtime; builder: ONNX
        Runtime. GPU: the GPU template; runtime: the server, onnxruntime-gpu and NVML
        (the CUDA wheels are a layer of their own); builder: onnxruntime-gpu and the fp16
        converter."""
        if spec.build.onnxruntime.device == "gpu":
            return ImageRecipe(
                "Dockerfile.onnxruntime-gpu.j2", ("server", "gpu"), ("onnxruntime-gpu", "fp16")
            )
        return ImageRecipe("Dockerfile.onnxruntime.j2", ("server", "onnxruntime"), ("onnxruntime",))

    def check_spec(self, spec: ModelSpec) -> list[tuple[KeyPath, str]]:
        """Device, accelerator, precision and CUDA graph combinations that cannot work
        (:func:`mmaas.backends.onnxruntime.host.gpu_spec.check_gpu_spec`)."""
        return check_gpu_spec(spec)

    def check_input(self, name: str) -> str | None:
        """Any input name is fine (ONNX Runtime takes names as they are)."""
        return None

    def check_datatype(self, spec: ModelSpec, datatype: str) -> str | None:
        """None: ONNX Runtime carries every KServe v2 datatype (BF16 through OrtValues,
        :mod:`mmaas.core.ort_io`)."""
        return None

    def engine_settings(self, spec: ModelSpec) -> OnnxRuntimeSettings:
        """``build.onnxruntime``; on GPU also the instance settings (and, for the TensorRT
        provider, ``build.workspace``, ``build.timing_cache`` and ``build.tensorrt``)."""
        return OnnxRuntimeSettings(
            spec.build.onnxruntime.graph_optimization_level, gpu_settings(spec)
        )

    def builder_image(self, spec: ModelSpec) -> str:
        """``image.base_image``: both CPU stages start from it."""
        return spec.image.base_image

    def pin(self, spec: ModelSpec) -> dict[str, str]:
        """ONNX Runtime's version in the image constraints (onnxruntime-gpu's on GPU)."""
        package = "onnxruntime-gpu" if spec.build.onnxruntime.device == "gpu" else "onnxruntime"
        return {"name": self.name, "version": pinned_version(package) or "unpinned"}

    def hardware_class(self, spec: ModelSpec) -> dict[str, Any]:
        """``{"arch"}``, plus the kernel vector extensions of this CPU (``"cpu_flags"``)
        when level ``all`` lays the graph out for them."""
        cpu = OnnxRuntimeRuntime().describe()["cpu"]
        if spec.build.onnxruntime.device == "gpu":  # basic level: provider-independent
            return {"arch": cpu["arch"], "device": "gpu"}
        if spec.build.onnxruntime.graph_optimization_level != "all":
            return {"arch": cpu["arch"]}
        return {"arch": cpu["arch"], "cpu_flags": cpu["flags"]}

    def template_values(self, spec: ModelSpec) -> dict[str, Any]:
        """GPU: the pinned versions the image is labelled with, and the CUDA wheels."""
        if spec.build.onnxruntime.device != "gpu":
            return {}
        return {
            "ort_version": pinned_version("onnxruntime-gpu") or "unpinned",
            "cuda_version": pinned_version("nvidia-cuda-runtime") or "unpinned",
            "cudnn_version": pinned_version("nvidia-cudnn-cu13") or "unpinned",
            "gpu_libraries": [f"{name}=={pinned_version(name)}" for name in GPU_LIBRARIES],
        }

    def engine_files(self, spec: ModelSpec, folder: Path) -> tuple[ContextFile, ...]:
        """None beyond the ONNX file, its external data and the samples."""
        return ()

    def preflight(self, spec: ModelSpec, image: str) -> str | None:
        """Nothing to check before Docker work; no extra tag."""
        return None

    def compile_engine(self, build: CompileBuild) -> Path:
        """The compile build (its last stage holds the engine directory at
        :data:`~mmaas.backends.targets.ENGINE_DIR`), copied out to ``work/engine``; the
        compile image is removed afterwards."""
        image = build.build(None)
        try:
            return build.copy_out(ENGINE_DIR, build.work / "engine")
        finally:
            build.remove_image(image)

    def labels(self, manifest: Manifest) -> dict[str, str]:
        """None beyond the common labels."""
        return {}

    def readiness(self, host: DockerHost) -> Readiness:
        """ONNX Runtime on the host (the engine-cache key reads its CPU facts; ``mmaas
        serve`` runs it), its CUDA provider with the driver and CUDA versions and, when
        onnxruntime-gpu is installed, a CUDA session really running
        (:func:`mmaas.backends.onnxruntime.host.doctor.cuda_provider`: not usable when it
        cannot), and a Docker engine."""
        import onnxruntime

        from mmaas.backends.onnxruntime.host.doctor import cuda_provider

        line, problem = cuda_provider()
        check = HostCheck(
            "onnxruntime", problem is None, f"ONNX Runtime {onnxruntime.__version__}; {line}"
        )
        if problem is not None:
            return Readiness(
                (check,),
                False,
                f"onnxruntime-gpu cannot create a CUDA session here ({problem}); GPU models "
                "would not serve: check nvidia-smi, CUDA_VISIBLE_DEVICES and the CUDA/cuDNN "
                "libraries",
            )
        if not host.docker.ok:
            return Readiness((check,), False, host.docker.summary)
        return Readiness((check,), True, "Docker engine and ONNX Runtime")

    def engine_command(self, spec: ModelSpec, source: Path, spec_file: str) -> None:
        """None: the compile is ONNX Runtime's own API (``SessionOptions.
        optimized_model_filepath``), not a command."""
        return None

    def build_commands(
        self,
        spec: ModelSpec,
        docker: list[str],
        build_args: Callable[[Path, str, str | None], list[str]],
        contexts: tuple[Path, Path],
        image: str,
        env: Mapping[str, str],
    ) -> list[BuildCommand]:
        """The compile build, the copy of its engine directory into the package context
        (``docker create`` / ``cp`` / ``rm`` of a container named after the model: nothing
        runs in it), the package build."""
        compile_tag, holder = f"{spec.image_repository}:engine", f"mmaas-{spec.name}-engine"
        compile_ctx, package_ctx = contexts

        def build(context: Path, tag: str) -> list[str]:
            return [*docker, "build", *build_args(context / "Dockerfile", tag, None), str(context)]

        return [
            BuildCommand("compile build: the engine", build(compile_ctx, compile_tag), env),
            BuildCommand(
                "a container of it (never started)",
                [*docker, "create", "--name", holder, compile_tag],
            ),
            BuildCommand(
                "its engine directory into the package context",
                [*docker, "cp", f"{holder}:{ENGINE_DIR}", str(package_ctx / ENGINE_CONTEXT)],
            ),
            BuildCommand("the container removed", [*docker, "rm", holder]),
            BuildCommand("package build: the image", build(package_ctx, image), env),
        ]
