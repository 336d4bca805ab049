"""Checks the GPU Dockerfile runs in each stage, before and around the engine build.

Command line (``templates/Dockerfile.tensorrt.j2``)::

    python -m mmaas.backends.tensorrt.runtime.preflight preflight --tensorrt 10.13 [--gpu]
    python -m mmaas.backends.tensorrt.runtime.preflight pin [--cuda-only] > tensorrt-pin.txt

``preflight`` fails (exit 1, one line) when this stage's TensorRT (the tensorrt module, or
trtexec's ``[TensorRT vNNNNNN]`` banner) is not the pinned release (C10), and with
``--gpu`` when no GPU is visible, naming the routes that give a build one (C11), so
trtexec never starts without a GPU. ``pin`` prints the pip requirements that put exactly
this stage's TensorRT runtime into the runtime stage (``tensorrt-cu<CUDA major>-libs`` and
``-bindings`` at this exact version) and the cuda-python of the same CUDA major (CUDA
major from ``CUDA_VERSION``, which NVIDIA's images set); ``--cuda-only`` prints only the
cuda-python line (the builder image already has TensorRT).
"""

from __future__ import annotations

import argparse
import os
import sys

from mmaas.backends.tensorrt.runtime import tensorrt_version
from mmaas.backends.tensorrt.runtime.gpu import no_gpu_message, query_gpus
from mmaas.backends.tensorrt.runtime.releases import parse_version
from mmaas.core.errors import BuildError, MmaasError


def preflight(pinned: str, need_gpu: bool) -> str:
    """Check the TensorRT release (and a GPU); returns a one-line summary.

    Raises:
        BuildError: another release than ``pinned``, no TensorRT, or no GPU.
    """
    installed = tensorrt_version()
    if installed is None:
        raise BuildError("no TensorRT in this stage (no tensorrt module, no trtexec)")
    if parse_version(installed)[: len(parse_version(pinned))] != parse_version(pinned):
        raise BuildError(
            f"this stage has TensorRT {installed}, the build pins {pinned}: "
            "builder and runtime stages must come from one release"
        )
    if not need_gpu:
        return f"TensorRT {installed} matches the pin {pinned}"
    report = query_gpus()
    if not report.gpus:
        raise BuildError(no_gpu_message(report.problem or "no GPU"))
    gpu = report.gpus[0]
    return (
        f"TensorRT {installed}; GPU {gpu.name} (sm{gpu.compute_capability}), "
        f"driver {gpu.driver_version}"
    )


def pin_requirements(cuda_only: bool = False) -> str:
    """``cuda-python>=M,<M+1``, then ``tensorrt-cuM-libs==V`` and ``tensorrt-cuM-bindings==V``
    (unless ``cuda_only``) for this stage's CUDA major M and TensorRT version V.

    Raises:
        BuildError: no TensorRT, or ``CUDA_VERSION`` is unset (not an NVIDIA image).
    """
    installed, cuda = tensorrt_version(), os.environ.get("CUDA_VERSION")
    if installed is None or not cuda:
        raise BuildError("cannot pin the runtime: TensorRT or CUDA_VERSION is missing here")
    major = parse_version(cuda)[0]
    lines = [f"cuda-python>={major},<{major + 1}"]
    if not cuda_only:
        lines += [f"tensorrt-cu{major}-{part}=={installed}" for part in ("libs", "bindings")]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    """Entry point; returns the exit code (1 with one line on stderr on failure)."""
    parser = argparse.ArgumentParser(prog="python -m mmaas.backends.tensorrt.runtime.preflight")
    verbs = parser.add_subparsers(dest="verb", required=True)
    check = verbs.add_parser("preflight")
    check.add_argument("--tensorrt", required=True, help="pinned release, e.g. 10.13")
    check.add_argument("--gpu", action="store_true", help="also require a visible GPU")
    pin = verbs.add_parser("pin")
    pin.add_argument("--cuda-only", action="store_true", help="only the cuda-python line")
    args = parser.parse_args(argv)
    try:
        if args.verb == "pin":
            text = pin_requirements(args.cuda_only)
        else:
            text = preflight(args.tensorrt, args.gpu)
    except MmaasError as exc:
        print(f"mmaas: error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(text, end="" if text.endswith("\n") else "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
