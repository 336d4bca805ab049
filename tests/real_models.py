"""Real models beyond the PP-OCR set, fetched from the PyPI wheels their authors ship them
in, pinned and sha256-checked with ``scripts/fetch_models.py``'s functions.

silero-vad (voice activity detection, ``silero-vad==6.2.3``): ``input`` FP32 [batch,
samples], ``state`` FP32 [2, batch, 128] and the sample rate ``sr`` INT64, a scalar the
graph branches on (16000 or 8000; the 8 kHz branch takes at most 351 samples a chunk);
``output`` FP32 [batch, 1] and ``stateN`` FP32 [2, batch, 128].
"""

from __future__ import annotations

from pathlib import Path

from scripts.fetch_models import extract, fetch_wheel

from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.core.sample_values import SampleValues
from paths import ROOT

SILERO_PACKAGE = "silero-vad==6.2.3"
SILERO_WHEEL = "silero_vad-6.2.3-py3-none-any.whl"
SILERO_WHEEL_SHA256 = "7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8"
SILERO_MEMBER = "silero_vad/data/silero_vad.onnx"
SILERO_SHA256 = "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3"


def silero_vad(cache: Path = ROOT / ".cache" / "wheels") -> Path:
    """The silero-vad ONNX file (in ``.cache/models/``), fetched and checked if absent."""
    target = cache.parent / "models" / "silero-vad" / Path(SILERO_MEMBER).name
    wheel = fetch_wheel(cache, SILERO_PACKAGE, SILERO_WHEEL, SILERO_WHEEL_SHA256)
    extract(wheel, SILERO_MEMBER, SILERO_SHA256, target)
    return target


def silero_info(name: str = "silero-vad") -> ModelInfo:
    """silero-vad as served: no batch axis of its own (``sr`` is a scalar), 1..4 streams
    of 256..640 samples, ``sr`` sampled as 16000 (its branch takes 200..640 samples)."""
    inputs = (
        TensorInfo("input", "FP32", (-1, -1), min=(1, 256), opt=(1, 512), max=(4, 640)),
        TensorInfo(
            "state", "FP32", (2, -1, 128), min=(2, 1, 128), opt=(2, 1, 128), max=(2, 4, 128)
        ),
        TensorInfo("sr", "INT64", (), sample_values=SampleValues("constant", (16000,))),
    )
    outputs = (TensorInfo("output", "FP32", (-1, 1)), TensorInfo("stateN", "FP32", (2, -1, 128)))
    return ModelInfo(name, "1", "onnxruntime", "fp32", 0, inputs, outputs)
