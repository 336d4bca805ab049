"""Plan values of a TensorRT image (``templates/Dockerfile.tensorrt.j2``). Pure.

The GPU route ``mmaas build`` uses for TensorRT is **compile in a ``docker run --gpus
all`` container, then package** (case C11):

1. ``docker build --target builder`` makes the builder image from ``builder_image`` (no GPU
   needed: it only installs and copies; the release check runs here).
2. ``docker run --rm --gpus all`` of that image (:func:`compile_run_argv`) first checks for
   a GPU (``tensorrt_stage preflight --gpu``: no GPU, no trtexec) and then runs
   ``python -m mmaas.stage build``: trtexec, profile check, gates, hashes, manifest,
   written to ``out/engine`` (as the calling user: ``--user UID:GID``). The host's
   timing-cache directory (``mmaas cache``) is mounted, so caches persist across builds
   and CI runs, keyed by TensorRT version, compute capability and GPU (C8).
3. The engine directory it wrote is verified on the host (and kept in the engine cache),
   staged as ``engine/``, and the package build stamps it in the builder stage and copies
   it into the runtime stage, which re-hashes it (``mmaas.stage verify``), so an image
   with a missing, empty or altered engine is never produced.

Why this route: it works on any Docker with the NVIDIA Container Toolkit. BuildKit
``RUN`` steps get no GPU (moby/buildkit#1800) unless the engine has CDI and the Dockerfile
uses ``RUN --device`` (a labs front-end that must be pulled, and that hadolint cannot
parse); the legacy builder needs ``"default-runtime": "nvidia"`` on the daemon and has no
cache mounts.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mmaas.backends.tensorrt.runtime.releases import (
    parse_version,
    trtexec_flags,
    version_from_image_tag,
)
from mmaas.core.errors import SpecError, SpecProblem, UsageError
from mmaas.spec.model import ModelSpec

TIMING_CACHE_DIR = "/opt/mmaas/timing-cache"
OUT_DIR = "/opt/mmaas/out"
GPU_ROUTE = "docker-run"


def tensorrt_plan_values(spec: ModelSpec, spec_file: str = "model.yaml") -> dict[str, Any]:
    """The template values a TensorRT image needs beyond the CPU plan's.

    Returns ``builder_image``, ``runtime_image``, ``tensorrt_version`` (the pin checked in
    both stages), ``timing_cache_dir``, ``out_dir``, ``gpu_route``, ``gpu_targets``.

    Raises:
        SpecError: the version is not a checked release, the builder image tag names
            another TensorRT release than ``build.tensorrt.version`` (C10), or a
            ``gpu_targets`` entry is not ``sm<cc>`` (or is below sm89 for fp8).
    """
    trt = spec.build.tensorrt
    problems = []
    try:
        trtexec_flags(trt.version)
    except UsageError as exc:
        problems.append(SpecProblem(spec_file, "build.tensorrt.version", str(exc)))
    tagged = version_from_image_tag(trt.builder_image)
    if tagged and not problems and not _same_release(tagged, trt.version):
        problems.append(
            SpecProblem(
                spec_file,
                "build.tensorrt.builder_image",
                f"{trt.builder_image} is TensorRT {tagged}, but "
                f"build.tensorrt.version is {trt.version}; pin one release",
            )
        )
    problems += _target_problems(spec, spec_file)
    if problems:
        raise SpecError(problems)
    return {
        "builder_image": trt.builder_image,
        "runtime_image": trt.runtime_image,
        "tensorrt_version": trt.version,
        "timing_cache_dir": TIMING_CACHE_DIR,
        "out_dir": OUT_DIR,
        "gpu_route": GPU_ROUTE,
        "gpu_targets": list(trt.gpu_targets),
    }


def compile_run_argv(
    docker: list[str], builder_tag: str, cache_dir: Path, out_dir: Path, user: str | None = None
) -> list[str]:
    """Step 2 of the route: ``docker run --rm --gpus all`` of the builder image with the
    host timing-cache directory and an output directory mounted; the container writes the
    engine directory to ``out_dir/engine``. ``user`` (``"UID:GID"``, ``--user``) makes the
    files it writes the caller's, so a non-root host can read and remove them."""
    return [
        *docker,
        "run",
        "--rm",
        "--gpus",
        "all",
        *(["--user", user] if user else []),
        "--volume",
        f"{cache_dir.resolve()}:{TIMING_CACHE_DIR}",
        "--volume",
        f"{out_dir.resolve()}:{OUT_DIR}",
        builder_tag,
    ]


def target_capability(target: str) -> str | None:
    """``"sm86"`` -> ``"8.6"``, ``"sm100"`` -> ``"10.0"``; None when not ``sm<digits>``."""
    match = re.fullmatch(r"sm(\d+)(\d)", target.strip().lower())
    return f"{match.group(1)}.{match.group(2)}" if match else None


def _target_problems(spec: ModelSpec, spec_file: str) -> list[SpecProblem]:
    problems = []
    for index, target in enumerate(spec.build.tensorrt.gpu_targets):
        key = f"build.tensorrt.gpu_targets[{index}]"
        capability = target_capability(target)
        if capability is None:
            problems.append(
                SpecProblem(
                    spec_file,
                    key,
                    f"{target!r} is not a GPU target; "
                    "write sm<compute capability>, e.g. sm86 or sm90",
                )
            )
        elif spec.target_precision == "fp8" and parse_version(capability) < (8, 9):
            problems.append(
                SpecProblem(
                    spec_file,
                    key,
                    f"fp8 needs compute capability 8.9 or newer; {target} is {capability}",
                )
            )
    return problems


def _same_release(tagged: str, pinned: str) -> bool:
    wanted = parse_version(pinned)
    return parse_version(tagged)[: len(wanted)] == wanted
