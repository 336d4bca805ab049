"""The GPU variant of models/qwen-vl (models/qwen-vl-gpu: ``--device gpu --precision fp16``)
on a machine without a GPU, as ``mmaas build``'s builder stage sees it: model.yaml carries the
device, precisions, sequences, cache share and vision buckets (the vision engine's CUDA
graphs at the pipeline's patch buckets); both engines are typed graphs, copied as they are
(no CPU optimization pass); the stage checks them on the CPU provider (fp16 runs there) and
the generation gate passes the fp16 language engine against the FP32 reference; a bf16
precision on a graph exported in fp32 is refused, saying how to export one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from mmaas.build.local import compile_local
from mmaas.core.errors import BuildError

pytestmark = pytest.mark.slow


def test_model_yaml_holds_the_gpu_settings(qwen_vl_gpu_export: Path) -> None:
    spec = yaml.safe_load((qwen_vl_gpu_export / "model.yaml").read_text())
    vision, language = spec["engines"]["vision"], spec["engines"]["language"]
    assert vision["target_precision"] == language["target_precision"] == "fp16"
    assert vision["build"]["onnxruntime"]["device"] == "gpu"
    assert language["build"]["onnxruntime"] == {"device": "gpu"}
    settings = spec["pipeline"]["settings"]
    assert (settings["max_sequences"], settings["kv_cache_memory"]) == (4, 0.5)
    shapes = vision["build"]["onnxruntime"]["cuda_graph_shapes"]
    assert [s["pixel_values"][0] for s in shapes] == settings["vision_patch_buckets"] == [284, 1052]
    assert language["checks"]["generation"]["samples"] == "language_gate.npz"


def test_the_typed_engines_build_and_pass_the_generation_gate(qwen_vl_gpu_export, tmp_path) -> None:
    folder = tmp_path / "gpu"
    shutil.copytree(qwen_vl_gpu_export, folder, ignore=shutil.ignore_patterns(".mmaas"))
    model_dir = compile_local(folder)[1]
    vision = json.loads((model_dir / "vision" / "report.json").read_text())
    language = json.loads((model_dir / "language" / "report.json").read_text())
    for report in (vision, language):
        assert report["compile"]["typed_graph"] == "fp16"
    for engine in ("vision", "language"):  # the image's user 10001 reads them
        assert {oct(p.stat().st_mode & 0o777) for p in (model_dir / engine).iterdir()} == {"0o644"}
        assert report["compile"]["graph_optimization_level"] == "none (typed graph)"
    gate = language["generation"]
    assert gate["passed"] and gate["top1_agreement"] >= 0.9 and gate["nonfinite_logits"] == 0
    execution = json.loads((model_dir / "vision" / "execution.json").read_text())
    assert [s["pixel_values"] for s in execution["gpu"]["graph_shapes"]] == [
        [284, 1176],
        [1052, 1176],
    ]


def test_bf16_on_a_graph_exported_in_fp32_is_refused(
    qwen_vl_gpu_export, qwen_vl_export, tmp_path
) -> None:
    folder = tmp_path / "bf16"
    shutil.copytree(qwen_vl_gpu_export, folder, ignore=shutil.ignore_patterns(".mmaas"))
    shutil.copy(qwen_vl_export / "qwen2_vl_language.onnx", folder)  # the FP32 export
    spec = folder / "model.yaml"
    spec.write_text(
        spec.read_text().replace(
            "target_precision: fp16  # the graph's own", "target_precision: bf16  # the graph's own"
        )
    )
    with pytest.raises(BuildError, match=r"qwen2_vl_language.onnx is not a bf16 graph and ONNX "
                       r"Runtime has no bf16 conversion; export the graph in bf16"):  # fmt: skip
        compile_local(folder)
