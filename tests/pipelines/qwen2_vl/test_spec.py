"""The qwen2-vl pipeline kind's spec part at spec load: models/qwen-vl validates and serves
Triton's LLM interface; model.yaml (and models/qwen-vl-gpu/model.yaml) is what the converter
writes for the small checkpoint; the kind's cross-checks report engines whose profile points
do not fit together, settings past the profiles, an asset from another conversion and
missing parts, each under ``pipeline.settings`` with its line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mmaas.build.spec_checks import host_checks
from mmaas.build.wheel import pipeline_requirements
from mmaas.core.errors import SpecError
from mmaas.pipelines.qwen2_vl.export.spec_file import Profile, Target, render
from mmaas.spec.load import load_spec

FILES = ("qwen2_vl_vision.onnx", "qwen2_vl_language.onnx", "runtime.json", "tokenizer.json",
         "embed_tokens.npy", "language_gate.npz")  # fmt: skip


@pytest.fixture
def folder(qwen_vl_export: Path, tmp_path: Path) -> Path:
    """A copy of models/qwen-vl (model.yaml, the two ONNX sources, the three assets)."""
    for name in (*FILES, "model.yaml"):
        shutil.copy(qwen_vl_export / name, tmp_path / name)
    return tmp_path


def test_models_qwen_vl_serves_the_llm_interface(qwen_vl_export: Path) -> None:
    loaded = load_spec(qwen_vl_export, checks=host_checks())
    assert loaded.pipeline is not None and loaded.pipeline.kind == "qwen2-vl"
    model = loaded.pipeline.model
    assert [(t.name, t.datatype, t.optional) for t in model.inputs] == [
        ("text_input", "BYTES", True),  # or messages: the runtime asks for one of the two
        ("messages", "BYTES", True),
        ("image", "BYTES", True),
        ("stop", "BYTES", True),
        ("max_tokens", "INT32", True),
        ("temperature", "FP32", True),
        ("top_p", "FP32", True),
        ("top_k", "INT32", True),
        ("seed", "INT32", True),
        ("presence_penalty", "FP32", True),
        ("frequency_penalty", "FP32", True),
        ("logprobs", "INT32", True),
        ("stream", "BOOL", True),
    ]
    assert model.inputs[2].max == (8,)
    assert model.inputs[3].max == (4,)  # OpenAI's limit on stop strings
    assert [(t.name, t.datatype, t.shape) for t in model.outputs] == [
        ("text_output", "BYTES", (1,)),
        ("output_ids", "INT32", (-1,)),
        ("finish_reason", "BYTES", (1,)),
        ("num_input_tokens", "INT32", (1,)),
        ("output_logprobs", "BYTES", (-1,)),
    ]
    assert loaded.pipeline.serve_engines == ("vision",)


def test_model_yaml_is_the_converters_for_the_small_checkpoint(qwen_vl_export: Path) -> None:
    written = render(4, 2, 64, 256, Profile(), "the small random seeded checkpoint")
    assert (qwen_vl_export / "model.yaml").read_text() == written
    gpu = render(4, 2, 64, 256, Profile(), "the small random seeded checkpoint",
                 Target("gpu", "fp16"))  # fmt: skip
    assert (qwen_vl_export.parent / "qwen-vl-gpu" / "model.yaml").read_text() == gpu


def test_only_qwen2_vl_images_install_pillow_tokenizers_and_httpx() -> None:
    required = "pillow\ntokenizers\nhttpx\nhttpcore\nh11\ncertifi\n"
    assert pipeline_requirements("qwen2-vl") == required
    assert pipeline_requirements("ensemble") == pipeline_requirements(None) == ""


def problems(folder: Path) -> str:
    with pytest.raises(SpecError) as raised:
        load_spec(folder, checks=host_checks())
    return str(raised.value)


def test_a_language_profile_whose_points_do_not_fit_is_reported(folder: Path) -> None:
    spec = folder / "model.yaml"
    spec.write_text(spec.read_text().replace("opt: [3, 1, 1]", "opt: [3, 2, 1]"))  # a batch of 2
    found = problems(folder)
    assert "pipeline.settings: the language engine's opt shapes do not fit together" in found
    assert "position_ids [3, 2, 1]" in found and "batch sizes [1, 2]" in found


def test_settings_past_the_profiles_are_reported(folder: Path) -> None:
    spec = folder / "model.yaml"
    settings = ("max_input_pixels: 64000000\n    max_sequences: 5\n    decode_batches: [1, 8]\n"
                "    vision_patch_buckets: [1024, 5000]")  # fmt: skip
    spec.write_text(spec.read_text().replace("max_input_pixels: 64000000", settings))
    found = problems(folder)
    assert "pipeline.settings.max_sequences: [5] is past the language profile's batch of 4" in found
    assert "pipeline.settings.decode_batches: [1, 8] is past" in found
    assert (
        "pipeline.settings.vision_patch_buckets: [1024, 5000]: past the vision profile's "
        "4096 patches" in found
    )


def test_assets_of_another_export_are_reported(folder: Path) -> None:
    config = json.loads((folder / "runtime.json").read_text())
    config["files"]["tokenizer.json"] = "0" * 64
    config["language"]["num_layers"] = 28
    (folder / "runtime.json").write_text(json.dumps(config))
    found = problems(folder)
    assert "asset 'tokenizer' (tokenizer.json) is not the file runtime.json was exported" in found
    assert "runtime.json says num_layers 28, the language engine has 4" in found


def test_missing_assets_and_engines_are_named(folder: Path) -> None:
    spec = folder / "model.yaml"
    spec.write_text(spec.read_text().replace("  embed_tokens: embed_tokens.npy", ""))
    assert "needs assets named runtime, tokenizer, embed_tokens (missing: embed_tokens)" in (
        problems(folder)
    )
    text = spec.read_text().replace("  language:\n", "  decoder:\n")
    spec.write_text(text)
    assert "(missing: language)" in problems(folder)
