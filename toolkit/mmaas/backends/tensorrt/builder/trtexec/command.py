"""The trtexec command of one engine compile, with the builder stage's own paths.

One function makes it for both sides, so what ``mmaas render`` prints and ``mmaas validate``
checks on the host is the argv the compile container runs (:mod:`mmaas.backends.tensorrt.
compiler`): trtexec where NVIDIA's TensorRT images have it, the ONNX file where the
template copies the model folder (``COPY model/ /opt/mmaas/build/model/``), and every
output relative to the engine directory the compile assembles (trtexec runs there):
``model.plan``, ``trtexec/timing.cache`` (the private copy of the stored timing cache),
``trtexec/layers.json`` ... and, for an fp16 build on TensorRT 11, the converted graph
``trtexec/model.fp16.onnx``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mmaas.backends.tensorrt.builder.settings import TensorRTSettings
from mmaas.backends.tensorrt.builder.trtexec.argv import trtexec_argv
from mmaas.backends.tensorrt.runtime.releases import parse_version
from mmaas.core.manifest import ModelInfo

TRTEXEC = "/usr/src/tensorrt/bin/trtexec"  # NVIDIA's TensorRT images
STAGED_MODEL_DIR = "/opt/mmaas/build/model"  # the template's COPY model/ target
ENGINE_FILE = "model.plan"
EXPORTS_DIR = "trtexec"
TIMING_CACHE_FILE = f"{EXPORTS_DIR}/timing.cache"
FP16_ONNX = f"{EXPORTS_DIR}/model.fp16.onnx"


def converts_to_fp16(precision: str, version: str) -> bool:
    """True when the builder converts the graph to fp16 before trtexec: an fp16 target on
    TensorRT 11+, which has no precision flags
    (:mod:`mmaas.backends.tensorrt.builder.precision`)."""
    return precision == "fp16" and parse_version(version)[0] >= 11


def compile_argv(
    model: ModelInfo,
    settings: TensorRTSettings,
    version: str,
    network: Mapping[str, Sequence[int]],
    *,
    onnx: str,
    typed_graph: bool,
    trtexec: str = TRTEXEC,
    compute_capability: str | None = None,
    spec_file: str = "model.yaml",
) -> list[str]:
    """The argv that compiles ``onnx`` (its path in the builder stage, or :data:`FP16_ONNX`)
    into :data:`ENGINE_FILE`, run in the engine directory.

    Args:
        model, settings, version: as :func:`~mmaas.backends.tensorrt.builder.trtexec.argv.
            trtexec_argv` takes them. network: the ONNX file's input dims.
        typed_graph: the graph already carries the target precision.
        trtexec: the binary (the compile passes the one it found).
        compute_capability: the GPU's, when known (fp8 check).

    Raises:
        SpecError: every setting the release refuses, each with its key path.
    """
    calibration = settings.calibration_cache
    return trtexec_argv(
        model,
        settings,
        version,
        onnx,
        ENGINE_FILE,
        TIMING_CACHE_FILE if settings.timing_cache else None,
        exports_dir=EXPORTS_DIR,
        calibration_cache=f"{STAGED_MODEL_DIR}/{calibration}" if calibration else None,
        typed_graph=typed_graph,
        compute_capability=compute_capability,
        verify_cache=settings.timing_cache_verify,
        trtexec=trtexec,
        spec_file=spec_file,
        network=network,
    )
