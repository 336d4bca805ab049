"""The GPU route of ``mmaas build`` for TensorRT (see :mod:`mmaas.backends.tensorrt.host.image`):
``docker build --target builder`` -> ``docker run --rm --gpus all`` of that image (the
compile, with the host's ``mmaas cache`` timing-cache directory mounted) -> the engine
directory it wrote, handed to the same package build as ONNX Runtime.

Also the checks and labels around it: no GPU is reported before any Docker work (C11),
and the built image is labelled with the facts a host needs to run it (C12: minimum
driver, CUDA and TensorRT versions, GPU and compute capability, from ``manifest.backend``).
``mmaas render`` prints the same command sequence (:func:`gpu_build_commands`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from mmaas.backends.targets import BuildCommand, CompileBuild
from mmaas.backends.tensorrt.builder.timing_cache import TimingCacheStore
from mmaas.backends.tensorrt.host.image import compile_run_argv
from mmaas.backends.tensorrt.runtime.gpu import no_gpu_message, query_gpus
from mmaas.core import proc
from mmaas.core.errors import BuildError, ProcessError
from mmaas.core.manifest import Manifest

BUILDER_TARGET = "builder"
ENGINE_OUT = "engine"  # the compile container writes <out>/engine (the template's entrypoint)
LABEL = "io.mmaas"


def require_gpu() -> str:
    """The compute capability of this host's first GPU (``"8.6"``).

    Raises:
        BuildError: no GPU is visible (nvidia-smi missing, failing or listing none); the
            message names the routes that give a build one (C11).
    """
    report = query_gpus()
    if not report.gpus:
        raise BuildError(
            no_gpu_message(report.problem or "no GPU"),
            hint="run `mmaas build` on a GPU host, or `mmaas render MODEL --context DIR` "
            "and run the printed commands there",
        )
    return report.gpus[0].compute_capability


def target_tag(image: str, capability: str, targets: list[str]) -> str | None:
    """The per-target tag of ``image`` built on a GPU of ``capability`` (``"8.6"``) when
    ``build.tensorrt.gpu_targets`` lists targets: ``repo:tag-sm86`` (one engine and tag per
    target; each target's image is built on a GPU of that target). None without targets.

    Raises:
        BuildError: this GPU is none of ``targets`` (an engine only runs on the compute
            capability it was built on, unless hardware compatibility is on).
    """
    if not targets:
        return None
    here = f"sm{capability.replace('.', '')}"
    if here not in [t.strip().lower() for t in targets]:
        raise BuildError(
            f"this host's GPU is {here}, but build.tensorrt.gpu_targets lists "
            f"{', '.join(targets)}: build each target on a GPU of that target",
            hint="add this GPU's target to build.tensorrt.gpu_targets, or build elsewhere",
        )
    return f"{image}-{here}"


def host_user() -> str:
    """``"UID:GID"`` of this process, for the compile container's ``--user``."""
    return f"{os.getuid()}:{os.getgid()}"


def timing_cache_dir() -> Path:
    """The host timing-cache directory that ``mmaas cache`` manages (created if missing):
    ``$MMAAS_TIMING_CACHE_DIR``, else ``~/.cache/mmaas/timing-caches``."""
    root = TimingCacheStore().root
    root.mkdir(parents=True, exist_ok=True)
    return root


def compile_on_gpu(build: CompileBuild, out: Path) -> Path:
    """Run the compile of the GPU route and return the engine directory it wrote
    (``out/engine``; not yet verified): ``build`` builds the compile context with
    ``--target builder`` (tagged ``build.tag``), then ``docker run --gpus all`` of it
    compiles. The builder image is removed afterwards.

    Raises:
        DockerError: the builder build failed. BuildError: the compile container failed
            (no GPU inside it, trtexec or a gate failed: its output tail says which) or
            wrote no engine directory.
    """
    out.mkdir(parents=True, exist_ok=True)
    image = build.build(BUILDER_TARGET)
    argv = compile_run_argv(build.docker, build.tag, timing_cache_dir(), out, host_user())
    try:
        proc.stream(argv, what="docker run --gpus all (TensorRT engine compile)")
    except ProcessError as exc:
        raise BuildError(
            f"the TensorRT compile container failed (exit {exc.returncode})\n"
            + "\n".join("    " + line for line in exc.output_tail.splitlines()),
            hint=f"argv: {' '.join(argv)}",
        ) from exc
    finally:
        build.remove_image(image)
    engine = out / ENGINE_OUT
    if not engine.is_dir():
        raise BuildError(f"the TensorRT compile container wrote no engine directory at {engine}")
    return engine


def tensorrt_labels(manifest: Manifest) -> dict[str, str]:
    """Labels with the facts a host needs to run the engine (C12), from ``manifest.backend``
    (:meth:`mmaas.backends.tensorrt.runtime.TensorRTRuntime.describe` in the builder): TensorRT and
    CUDA versions, the minimum NVIDIA driver of that CUDA, the GPU's name and compute
    capability (``sm86``). Facts the builder did not know are left out."""
    facts = manifest.backend
    gpu = facts.get("gpu") or {}
    capability = gpu.get("compute_capability")
    labels = {
        f"{LABEL}.tensorrt.version": facts.get("version"),
        f"{LABEL}.cuda.version": facts.get("cuda_version"),
        f"{LABEL}.driver.min": facts.get("min_driver"),
        f"{LABEL}.gpu.name": gpu.get("name"),
        f"{LABEL}.gpu.compute_capability": capability,
        f"{LABEL}.gpu.target": f"sm{capability.replace('.', '')}" if capability else None,
    }
    return {name: str(value) for name, value in labels.items() if value}


def gpu_build_commands(
    docker: list[str],
    build_args: Callable[[Path, str, str | None], list[str]],
    contexts: tuple[Path, Path],
    tags: tuple[str, str],
    out: Path,
    cache_dir: Path,
    env: Mapping[str, str],
) -> list[BuildCommand]:
    """The argv sequence a GPU host runs (what :func:`compile_on_gpu` and the package
    build do): ``docker build --target builder`` of the compile context ``contexts[0]``
    tagged ``tags[0]``; ``mkdir -p out cache_dir`` (so that Docker does not create them
    owned by root); ``docker run --rm --gpus all --user UID:GID`` of it with ``cache_dir``
    and ``out`` mounted; ``cp -a out/engine contexts[1]/engine``; ``docker build`` of the
    package context tagged ``tags[1]``. ``build_args(dockerfile, tag, target)`` gives the
    build arguments (:func:`mmaas.build.docker.build_args`); ``env`` is each build's."""
    compile_ctx, package_ctx = contexts
    return [
        BuildCommand(
            "compile build: the builder stage (no GPU needed)",
            [
                *docker,
                "build",
                *build_args(compile_ctx / "Dockerfile", tags[0], BUILDER_TARGET),
                str(compile_ctx),
            ],
            env,
        ),
        BuildCommand(  # owned by the user the compile runs as
            "the compile's output and timing-cache directories",
            ["mkdir", "-p", str(out), str(cache_dir)],
        ),
        BuildCommand(
            "the compile on a GPU: trtexec, profile check, gates, hashes",
            compile_run_argv(docker, tags[0], cache_dir, out, host_user()),
        ),
        BuildCommand(
            "the engine directory into the package context",
            ["cp", "-a", str(out / ENGINE_OUT), str(package_ctx / "engine")],
        ),
        BuildCommand(
            "package build: the image",
            [
                *docker,
                "build",
                *build_args(package_ctx / "Dockerfile", tags[1], None),
                str(package_ctx),
            ],
            env,
        ),
    ]
