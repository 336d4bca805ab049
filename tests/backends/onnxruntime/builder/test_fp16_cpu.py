"""``target_precision: fp16`` with the CUDA provider, built on this CPU-only machine as a
builder stage builds it: the graph is converted after ONNX Runtime's basic optimization
(Conv+BN fused) and the accuracy gate measures it against ONNX Runtime CPU on the fp32
graph. Here the CPU provider runs the fp16 graph (ONNX Runtime casts around the nodes it
has no fp16 kernel for), so the gate sees the weights' rounding, not the GPU's arithmetic
(test_gpu.py measures that on the H200). Real models: PP-OCRv4 det and the qwen-vl vision
export, whose ``Cast(to=FLOAT)`` the converter retypes unless Cast stays fp32.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scripts.gpu_models import FP16_GATE, write_gpu_model

from mmaas.build.local import compile_local
from paths import ROOT

pytestmark = pytest.mark.slow


def fp16_report(model: str, tmp_path: Path) -> dict:
    folder = write_gpu_model(
        ROOT / "models" / model, tmp_path / model, precision="fp16", checks=FP16_GATE
    )
    return json.loads((compile_local(folder)[1] / "report.json").read_text())


def test_ppocr_det_fp16_converted_after_conv_bn_fusion_passes_the_gate_on_cpu(
    ppocr_models, tmp_path: Path
) -> None:
    report = fp16_report("ppocr-det", tmp_path)
    conversion = report["compile"]["fp16_conversion"]
    assert conversion == {
        "after": "basic optimization (Conv+BN fused)",
        "op_block_list": "default",
        "keep_io_types": True,
    }
    gate = report["accuracy"]["outputs"]["sigmoid_0.tmp_0"]
    assert report["accuracy"]["passed"] and gate["passed"]
    assert gate["cosine"] >= 0.9995 and gate["max_abs_diff"] <= 0.5
    assert report["accuracy"]["reference"].endswith("on ch_PP-OCRv4_det_infer.onnx")


def test_qwen_vision_fp16_keeps_cast_in_fp32_and_passes_the_gate_on_cpu(
    qwen_vl_export, tmp_path: Path
) -> None:
    report = fp16_report("qwen-vl", tmp_path)
    assert report["compile"]["fp16_conversion"]["op_block_list"] == "default+Cast"
    gate = report["accuracy"]["outputs"]["image_embeds"]
    assert report["accuracy"]["passed"] and gate["cosine"] >= 0.9995
