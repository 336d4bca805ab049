"""The converter reads the checkpoint's chat template's turn structure and proves it equal to
the template on conversations of every role, several turns and 0..8 pictures; a template of
another shape (numbered pictures, no default system prompt, a role's turn written
differently) is refused naming the conversation that differs."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import AutoTokenizer

from mmaas.pipelines.qwen2_vl.config import ChatTemplate
from mmaas.pipelines.qwen2_vl.export.side_files import SideFileError, chat_template


@pytest.fixture(scope="module")
def tokenizer(qwen_vl_export: Path):
    return AutoTokenizer.from_pretrained(qwen_vl_export / "checkpoint")


def test_the_checkpoints_template_is_chatml(tokenizer) -> None:
    assert chat_template(tokenizer, 8) == ChatTemplate(
        roles=("system", "user", "assistant"), turn_start="<|im_start|>", role_end="\n",
        turn_end="<|im_end|>\n", default_system="You are a helpful assistant.",
        image="<|vision_start|><|image_pad|><|vision_end|>",
        generation="<|im_start|>assistant\n",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("{% if add_vision_id %}", "{% if true %}"),  # "Picture 1: " before each picture
        ("{% if loop.first and message['role'] != 'system' %}", "{% if false %}"),
        ("<|im_start|>{{ message['role'] }}", "<|im_start|>{{ message['role'] | upper }}"),
        ("{{ content['text'] }}", "{{ content['text'] | trim }}"),
    ],
    ids=["numbered pictures", "no default system", "roles rewritten", "texts trimmed"],
)
def test_a_template_of_another_shape_is_refused(tokenizer, old: str, new: str) -> None:
    original = tokenizer.chat_template
    assert old in original
    tokenizer.chat_template = original.replace(old, new)
    try:
        with pytest.raises(
            SideFileError,
            match=r"chat template: \[\(.* renders .*, the turn "
            r"structure read from it gives",
        ):
            chat_template(tokenizer, 8)
    finally:
        tokenizer.chat_template = original
