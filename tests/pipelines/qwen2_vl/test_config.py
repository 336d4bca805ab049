"""runtime.json as :class:`RuntimeConfig`: what the converter writes reads back equal (and
the converted file is exactly its text), and every broken rule is refused naming the file,
the field and the fix."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from mmaas.core.errors import IntegrityError
from mmaas.pipelines.qwen2_vl.config import (
    ChatTemplate,
    Generation,
    ImageSettings,
    LanguageDims,
    RuntimeConfig,
    Tokens,
)

CONFIG = RuntimeConfig(
    schema=2,
    files={"tokenizer.json": "ab" * 32},
    image=ImageSettings(14, 2, 2, 3136, 802816, 3, 1 / 255, (0.48, 0.45, 0.4), (0.26, 0.26, 0.27)),
    tokens=Tokens(3998, 3995, 3996, (3988, 3986), 3986, ("<|image_pad|>",)),
    prompt=ChatTemplate(
        ("system", "user", "assistant"),
        "<|im_start|>",
        "\n",
        "<|im_end|>\n",
        "You are a helpful assistant.",
        "<|vision_start|><|image_pad|><|vision_end|>",
        "<|im_start|>assistant\n",
    ),
    prompt_proved_images=8,
    generation=Generation(1.05),
    language=LanguageDims(4, 2, 64, 256, 4096),
    exporter="cd" * 32,
)


def test_a_written_config_reads_back_equal(tmp_path: Path) -> None:
    path = tmp_path / "runtime.json"
    CONFIG.write(path)
    assert RuntimeConfig.read(path) == CONFIG
    assert path.read_text() == json.dumps(dataclasses.asdict(CONFIG), indent=2) + "\n"
    assert path.stat().st_mode & 0o777 == 0o644
    assert CONFIG.stop_ids == {3988, 3986} and CONFIG.image.patch_features == 1176


def test_the_converted_file_is_the_config_text(qwen_vl_export: Path) -> None:
    path = qwen_vl_export / "runtime.json"
    assert RuntimeConfig.read(path).to_json() == path.read_text()


def broken(tmp_path: Path, change) -> str:
    """The error reading runtime.json after ``change(data)`` edits its JSON object."""
    data = json.loads(CONFIG.to_json())
    change(data)
    path = tmp_path / "runtime.json"
    path.write_text(json.dumps(data))
    with pytest.raises(IntegrityError) as raised:
        RuntimeConfig.read(path)
    message = str(raised.value)
    fix = "; convert the checkpoint again (`mmaas convert qwen2-vl OUT_DIR`) and rebuild"
    assert message.startswith(f"{path}: ") and message.endswith(fix)
    return message.removeprefix(f"{path}: ").removesuffix(fix)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d.update(schema=1), "field 'schema': 1, this mmaas reads schema 2"),
        (lambda d: d.pop("schema"), "field 'schema': None, this mmaas reads schema 2"),
        (lambda d: d.pop("language"), "field 'language': missing"),
        (lambda d: d["language"].pop("vocab_size"), "field 'language.vocab_size': missing"),
        (lambda d: d.update(extra=1), "field 'extra': unknown field; expected schema, files, "
                                      "image, tokens, prompt, prompt_proved_images, generation, "
                                      "language, exporter"),
        (lambda d: d["language"].update(num_layers="4"),
         "field 'language.num_layers': expected an integer, got a string '4'"),
        (lambda d: d["language"].update(num_layers=4.0),
         "field 'language.num_layers': expected an integer, got a number 4.0"),
        (lambda d: d["tokens"].update(pad=True),
         "field 'tokens.pad': expected an integer, got a boolean True"),
        (lambda d: d["tokens"].update(pad=None),
         "field 'tokens.pad': expected an integer, got null None"),
        (lambda d: d["tokens"]["eos"].append("x"),
         "field 'tokens.eos[2]': expected an integer, got a string 'x'"),
        (lambda d: d["image"].update(image_mean=[0.5, 0.5]),
         "field 'image.image_mean': expected 3 items, got 2"),
        (lambda d: d["image"].update(image_std=0.5),
         "field 'image.image_std': expected a list, got a number"),
        (lambda d: d["files"].update({"x.onnx": 7}),
         "field 'files.x.onnx': expected a string, got an integer 7"),
        (lambda d: d.update(prompt="hi"), "field 'prompt': expected an object, got a string"),
        (lambda d: d["prompt"].pop("default_system"), "field 'prompt.default_system': missing"),
        (lambda d: d["prompt"].update(roles="user"),
         "field 'prompt.roles': expected a list, got a string"),
    ],
)  # fmt: skip
def test_each_broken_rule_names_the_field(tmp_path: Path, change, expected: str) -> None:
    assert broken(tmp_path, change) == expected


def test_unreadable_and_non_json_files_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "runtime.json"
    with pytest.raises(IntegrityError, match=r"runtime.json: cannot read runtime.json \("):
        RuntimeConfig.read(path)
    path.write_text("{not json")
    with pytest.raises(IntegrityError, match=r"runtime.json: not JSON \(Expecting"):
        RuntimeConfig.read(path)
    path.write_text("[1]")
    with pytest.raises(IntegrityError, match=r"field 'schema': None, this mmaas reads schema 2"):
        RuntimeConfig.read(path)


def test_the_converter_cannot_write_what_the_runtime_would_refuse(tmp_path: Path) -> None:
    config = dataclasses.replace(CONFIG, tokens=dataclasses.replace(CONFIG.tokens, pad=None))
    with pytest.raises(IntegrityError, match=r"field 'tokens\.pad': expected an integer, got null"):
        config.write(tmp_path / "runtime.json")
    assert not (tmp_path / "runtime.json").exists()


def test_the_template_renders_chatml_turns() -> None:
    turns = [("user", (None, "Who?")), ("assistant", ("Grace.",)), ("user", ("And", None))]
    image = "<|vision_start|><|image_pad|><|vision_end|>"
    assert CONFIG.prompt.render(turns) == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        f"<|im_start|>user\n{image}Who?<|im_end|>\n<|im_start|>assistant\nGrace.<|im_end|>\n"
        f"<|im_start|>user\nAnd{image}<|im_end|>\n<|im_start|>assistant\n"
    )
    assert CONFIG.prompt.render([("system", ("Terse.",)), ("user", ("Hi",))]) == (
        "<|im_start|>system\nTerse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
