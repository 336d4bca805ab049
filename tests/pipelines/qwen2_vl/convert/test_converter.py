"""``mmaas convert qwen2-vl`` (models/qwen-vl): the conversion of the small checkpoint is
byte-reproducible, runtime.json pins the converted files and marks the conversion current
(``--if-stale`` then does nothing), a real checkpoint folder is copied in and checked, and
an unusable one is one line on stderr, exit 1, no traceback.

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
             "tokenizer.json", "runtime.json", "model.yaml")  # fmt: skip


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
    assert not (tmp_path / "out").exists()


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
