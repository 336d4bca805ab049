"""BF16 through the builder stage and the ONNX Runtime engine (onnx_builder.bf16_model:
x BF16 -> y = x * x BF16, z = x FP32): the profile check and the accuracy gate run
bfloat16 samples, the manifest keeps BF16, and the engine takes and returns
ml_dtypes.bfloat16 arrays (ONNX Runtime's binding reads neither them nor uint16 words)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mmaas.backends import CompileRequest, get_runtime
from mmaas.core.datatypes import BFLOAT16
from mmaas.core.manifest import ModelInfo, TensorInfo, read_manifest
from mmaas.core.request import AccuracyCheck, Checks
from mmaas.stage.build import build_model_dir
from onnx_builder import ORT_SETTINGS, bf16_model

BF16_INFO = ModelInfo(
    name="bf16",
    version="1",
    backend="onnxruntime",
    precision="fp32",
    max_batch_size=4,
    inputs=(TensorInfo("x", "BF16", (-1, 4), (1, 4), (2, 4), (4, 4)),),
    outputs=(TensorInfo("y", "BF16", (-1, 4)), TensorInfo("z", "FP32", (-1, 4))),
)


def test_bf16_model_builds_checks_and_serves_bfloat16(tmp_path: Path) -> None:
    source = bf16_model(tmp_path / "bf16.onnx")
    out = tmp_path / "engine"
    request = CompileRequest(BF16_INFO, source, out, ORT_SETTINGS)
    build_model_dir(request, "sha256:" + "0" * 64, out, checks=Checks(AccuracyCheck(atol=0.0)))
    manifest = read_manifest(out)
    assert [t.datatype for t in manifest.model.inputs] == ["BF16"]
    assert manifest.report["accuracy"]["passed"]
    assert [p["outputs"]["y"] for p in manifest.report["profile_check"]] == [[1, 4], [2, 4], [4, 4]]
    engine = get_runtime("onnxruntime").load(out, manifest)
    x = np.array([[1.5, -2.0, 3.0, 0.25]], BFLOAT16)
    result = engine.infer({"x": x}, ["y", "z"])
    assert result["y"].dtype == BFLOAT16 and result["z"].dtype == np.float32
    assert result["y"].tolist() == [[2.25, 4.0, 9.0, 0.0625]]
    assert result["z"].tolist() == [[1.5, -2.0, 3.0, 0.25]]
