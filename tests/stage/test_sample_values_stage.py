"""Sample values drive the builder stage and the warm-up: a model whose INT64 input
selects a branch (onnx_builder.branch_model: rate 16000 runs at any length, any other
rate only at multiples of 160 samples) builds over a profile that only the right branch
holds when model.yaml gives ``rate``'s sample value, and fails naming the shapes when it
does not (random integers 0..7 take the wrong branch)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from mmaas.backends import CompileRequest
from mmaas.core.errors import BuildError
from mmaas.core.manifest import ModelInfo, TensorInfo, read_manifest
from mmaas.core.request import AccuracyCheck, Checks, LatencyCheck
from mmaas.core.sample_values import SampleValues
from mmaas.server.runtime import load_instances
from mmaas.server.settings import from_env
from mmaas.stage.build import build_model_dir
from onnx_builder import ORT_SETTINGS, branch_model

RATE = TensorInfo("rate", "INT64", (1,), (1,), (1,), (1,))
INFO = ModelInfo(
    name="branch",
    version="1",
    backend="onnxruntime",
    precision="fp32",
    max_batch_size=0,
    inputs=(TensorInfo("audio", "FP32", (1, -1), (1, 100), (1, 400), (1, 1000)), RATE),
    outputs=(TensorInfo("y", "FP32", (1, -1, -1)),),
)
CHECKS = Checks(
    accuracy=AccuracyCheck(atol=0.0), latency=LatencyCheck(p99_ms=10_000, runs=3, warmup=1)
)


def build(tmp_path: Path, info: ModelInfo, checks: Checks = CHECKS) -> Path:
    source = branch_model(tmp_path / "branch.onnx")
    request = CompileRequest(info, source, tmp_path / "engine", ORT_SETTINGS)
    build_model_dir(request, "sha256:" + "0" * 64, tmp_path / "engine", checks=checks)
    return tmp_path / "engine"


def with_rate(values: SampleValues) -> ModelInfo:
    return replace(INFO, inputs=(INFO.inputs[0], replace(RATE, sample_values=values)))


def test_random_integers_take_the_wrong_branch_and_fail_the_profile_check(tmp_path) -> None:
    with pytest.raises(BuildError, match=r"profile check failed at the min shapes \(audio: 1x100"):
        build(tmp_path, INFO, Checks())


def test_the_sample_value_selects_the_branch_for_the_check_gates_and_warm_up(tmp_path) -> None:
    model_dir = build(tmp_path, with_rate(SampleValues("constant", (16000,))))
    manifest = read_manifest(model_dir)
    assert manifest.model.inputs[1].sample_values == SampleValues("constant", (16000,))
    checked = manifest.report["profile_check"]
    assert [entry["outputs"]["y"] for entry in checked] == [[1, 100, 1], [1, 400, 1], [1, 1000, 1]]
    assert manifest.report["accuracy"]["passed"] and manifest.report["latency"]["passed"]
    settings = from_env({"MMAAS_MODEL_DIR": str(model_dir), "MMAAS_WARMUP_RUNS": "2"})
    # warm-up at opt (400) takes 16000
    assert len(load_instances(settings, model_dir, manifest)) == 1


def test_a_list_of_allowed_values_that_includes_a_wrong_branch_fails(tmp_path) -> None:
    with pytest.raises(BuildError, match="profile check failed"):
        build(tmp_path, with_rate(SampleValues("choices", (8000,))), Checks())
