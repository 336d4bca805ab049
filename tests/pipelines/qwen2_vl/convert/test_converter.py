"""``mmaas convert qwen2-vl`` (models/qwen-vl): the conversion of the small checkpoint is
byte-reproducible, runtime.json pins the converted files and marks the conversion current
(``--if-stale`` then does nothing), a real checkpoint folder is copied in and checked, an
unusable one is one line on stderr, exit 1, no traceback; the published ``2b`` configuration
has Qwen2-VL-2B's figures and its tokenizer the special tokens at the real ids.

The conversion itself is the one set-up made (the ``qwen_vl_export`` fixture re-runs it only
when it is missing or made by other code)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from mmaas.core.errors import UsageError
from mmaas.core.pipelines import load_part
from mmaas.pipelines.qwen2_vl.config import RuntimeConfig
from mmaas.pipelines.qwen2_vl.convert import checkpoint as checkpoints
from mmaas.pipelines.qwen2_vl.convert.converter import code_digest, is_current
from mmaas.pipelines.qwen2_vl.export.onnx_io import STACK_TRACE

pytestmark = pytest.mark.slow
CONVERTED = ("qwen2_vl_vision.onnx", "qwen2_vl_language.onnx", "embed_tokens.npy",
             "tokenizer.json", "runtime.json", "language_gate.npz", "model.yaml")  # fmt: skip


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def convert(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """``mmaas convert qwen2-vl ARGS`` in a subprocess, as set-up runs it."""
    argv = [sys.executable, "-m", "mmaas", "convert", "qwen2-vl", *map(str, args)]
    return subprocess.run(argv, capture_output=True, text=True, check=False)


def test_the_conversion_is_byte_reproducible(qwen_vl_export: Path, tmp_path: Path) -> None:
    """Same code, same torch and transformers: the same bytes, wherever the code lies (the
    graphs keep no stack trace, whose file paths would differ between checkouts)."""
    done = convert(tmp_path / "again", "--skip-validation")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith(f"qwen-vl export written: {tmp_path / 'again'} in ")
    checkpoint = (f"checkpoint/{p.name}" for p in (qwen_vl_export / "checkpoint").iterdir())
    names = [*CONVERTED, *checkpoint]
    made = {name: sha256(qwen_vl_export / name) for name in names}
    again = {name: sha256(tmp_path / "again" / name) for name in names}
    assert again == made
    graph = onnx.load(qwen_vl_export / "qwen2_vl_vision.onnx", load_external_data=False)
    assert not [p for n in graph.graph.node for p in n.metadata_props if p.key == STACK_TRACE]
    assert sorted(p.name for p in (qwen_vl_export / "checkpoint").iterdir()) == [
        "config.json", "generation_config.json", "model.safetensors",
        "preprocessor_config.json", "tokenizer.json", "tokenizer_config.json",
    ]  # fmt: skip


def test_runtime_json_pins_the_converted_files_and_marks_the_conversion_current(
    qwen_vl_export: Path,
) -> None:
    config = RuntimeConfig.read(qwen_vl_export / "runtime.json")
    for name, digest in config.files.items():
        assert sha256(qwen_vl_export / name) == digest, name
    assert config.prompt.image == "<|vision_start|><|image_pad|><|vision_end|>"
    assert config.generation.repetition_penalty == 1.05
    assert config.exporter == code_digest() and is_current(qwen_vl_export)
    run = convert(qwen_vl_export, "--if-stale")
    assert run.returncode == 0 and run.stdout == f"qwen-vl export up to date: {qwen_vl_export}\n"


def test_a_real_checkpoint_folder_is_copied_in_and_checked(qwen_vl_export: Path, tmp_path):
    source = qwen_vl_export / "checkpoint"
    checkpoints.copy_real(source, tmp_path / "copy")
    assert {p.name for p in (tmp_path / "copy").iterdir()} == {p.name for p in source.iterdir()}
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "config.json").write_text("{}")
    with pytest.raises(checkpoints.CheckpointError, match=r"bare/tokenizer.json: not found"):
        checkpoints.copy_real(tmp_path / "bare", tmp_path / "out")
    run = convert(tmp_path / "out", "--checkpoint", tmp_path / "bare")
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert run.stderr.splitlines()[-1] == (
        f"error: {tmp_path}/bare/tokenizer.json: not found; --checkpoint takes a folder"
    )


def test_a_checkpoint_that_does_not_load_is_one_line_from_its_own_process(
    qwen_vl_export: Path, tmp_path: Path
) -> None:
    """A real checkpoint's parts run in child processes: the child's error comes back as
    the one line the command prints."""
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("config.json", "tokenizer.json", "preprocessor_config.json"):
        (broken / name).write_bytes((qwen_vl_export / "checkpoint" / name).read_bytes())
    (broken / "model.safetensors").write_text("not safetensors")
    run = convert(tmp_path / "out", "--checkpoint", broken, "--skip-validation")
    assert run.returncode == 1 and "Traceback" not in run.stderr
    (error,) = [line for line in run.stderr.splitlines() if line.startswith("error: ")]
    assert error.startswith(
        f"error: {tmp_path}/out/checkpoint: not a Qwen2-VL checkpoint transformers loads "
        "(SafetensorError: Error while deserializing header: "
    )


def test_usage_mistakes_exit_2_with_one_line(tmp_path: Path) -> None:
    missing = convert(tmp_path / "out", "--checkpoint", tmp_path / "nowhere")
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    both = convert(tmp_path / "out", "--skip-validation", "--full-validation")
    assert both.returncode == 2 and "exclude each other" in both.stderr
    cpu = convert(tmp_path / "out", "--precision", "bf16")
    assert cpu.returncode == 2 and "--precision bf16 on --device cpu" in cpu.stderr
    assert not (tmp_path / "out").exists()


def test_the_2b_configuration_is_qwen2_vl_2bs() -> None:
    config = checkpoints.config_2b()
    text, vision = config.text_config, config.vision_config
    assert (text.hidden_size, text.intermediate_size, text.num_hidden_layers,
            text.num_attention_heads, text.num_key_value_heads, text.vocab_size) == (
        1536, 8960, 28, 12, 2, 151936)  # fmt: skip
    assert text.hidden_size // text.num_attention_heads == 128 and config.tie_word_embeddings
    assert text.rope_parameters["mrope_section"] == [16, 24, 24]
    sizes = (vision.depth, vision.embed_dim, vision.num_heads, vision.patch_size,
             vision.spatial_merge_size, vision.temporal_patch_size)  # fmt: skip
    assert sizes == (32, 1280, 16, 14, 2, 2)
    assert (config.image_token_id, config.vision_start_token_id, text.eos_token_id) == (
        151655, 151652, 151645)  # Qwen2-VL's real ids  # fmt: skip


def test_the_real_size_tokenizer_puts_the_special_tokens_at_the_real_ids() -> None:
    from mmaas.pipelines.qwen2_vl.convert.tokenizer import SPECIAL_TOKENS, build_tokenizer

    tokenizer = build_tokenizer(checkpoints.REAL_REGULAR)
    assert [tokenizer.token_to_id(t) for t in SPECIAL_TOKENS] == list(range(151643, 151657))
    ids = tokenizer.encode("<|im_start|>user\nDescribe this picture.<|im_end|>").ids
    assert ids[0] == 151644 and ids[-1] == 151645 and max(ids[1:-1]) < 3986  # no placeholder
    assert tokenizer.decode([151000]) == "<|reserved_151000|>"


def test_only_kinds_with_a_converter_convert() -> None:
    assert type(load_part("qwen2-vl", "convert")).__name__ == "Qwen2VLConverter"
    with pytest.raises(UsageError, match="'ensemble' has no convert part; kinds with one: q"):
        load_part("ensemble", "convert")


def test_the_verb_imports_no_torch_until_it_converts() -> None:
    script = (
        "import sys; from mmaas.cli import cli\n"
        "cli.main(['convert', 'qwen2-vl', '--help'], standalone_mode=False)\n"
        "heavy = {'torch', 'transformers', 'numpy', 'onnx', 'pydantic'} & set(sys.modules)\n"
        "print(sorted(heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "[]"
