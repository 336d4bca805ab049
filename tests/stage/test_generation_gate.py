"""The builder stage's generation gate (``checks.generation``) on the qwen2-vl language
engine: it passes the FP32 export against its FP32 reference (top-1 agreement 1.0 over every
teacher-forced step, cosine ~1), and refuses an engine whose answers drift, naming the
figures (the same engine against a reference whose tokens were changed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from mmaas.backends.onnxruntime.runtime import OnnxRuntimeEngine
from mmaas.build.requests import model_info
from mmaas.build.spec_checks import host_checks
from mmaas.core.request import GenerationCheck
from mmaas.spec.load import load_spec
from mmaas.stage.accuracy import GateFailed
from mmaas.stage.generation import generation_gate

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def language(qwen_vl_export: Path):
    """The language engine (a CPU session of the export) and its served signature."""
    loaded = load_spec(qwen_vl_export, checks=host_checks())
    spec = next(e.spec for e in loaded.engines if e.name == "language")
    path = qwen_vl_export / "qwen2_vl_language.onnx"
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return OnnxRuntimeEngine(session), model_info(spec)


def test_the_export_passes_against_its_reference(language, qwen_vl_export) -> None:
    engine, info = language
    check = GenerationCheck("language_gate.npz", min_top1=0.9, min_cosine=0.99)
    report = generation_gate(engine, info, check, qwen_vl_export / "language_gate.npz")
    assert report["passed"] and report["top1_agreement"] == 1.0 and report["steps"] == 8 * 32
    assert min(report["first_step_cosine"]) > 0.99999 and report["nonfinite_logits"] == 0


def test_a_drifting_engine_is_refused_with_the_figures(language, qwen_vl_export, tmp_path) -> None:
    engine, info = language
    data = dict(np.load(qwen_vl_export / "language_gate.npz"))
    for i in range(int(data["count"])):
        tokens = data[f"tokens_{i}"].copy()
        tokens[::3] = (tokens[::3] + 1) % 4000  # a third of the reference's choices differ
        data[f"tokens_{i}"] = tokens
        data[f"logits_{i}"] = -data[f"logits_{i}"]
    sample = tmp_path / "drift.npz"
    np.savez(sample, **data)
    check = GenerationCheck("drift.npz", min_top1=0.9, min_cosine=0.99)
    with pytest.raises(GateFailed, match=r"generation gate failed: greedy top-1 agreement "
                       r"0\.6\d+ over 256 steps \(min 0.9\), first-step logits cosine min "
                       r"-1\.0+ \(min 0.99\), 0 NaN/Inf logits") as raised:  # fmt: skip
        generation_gate(engine, info, check, sample)
    assert raised.value.report["passed"] is False
