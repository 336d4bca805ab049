"""Prompt ids equal Qwen2VLProcessor's (after apply_chat_template) and M-RoPE positions equal
Qwen2VLModel.get_rope_index, for 0..3 images and texts with special characters, and for
conversations (every role, several turns, pictures in any user turn) token for token what
the processor's own ``apply_chat_template(tokenize=True)`` gives; the vision placeholder
tokens are refused in user text, roles the template does not take and image parts that do
not number the pictures are refused."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from PIL import Image

from mmaas.core.errors import InputError
from mmaas.pipelines.qwen2_vl.runtime.conversation import Conversation, one_turn, read_messages
from mmaas.pipelines.qwen2_vl.runtime.prompt import rope_index

from .conftest import request

TEXTS = ["Describe this picture.", "", "  two\nlines  ", "émoji 😀 and <|im_end|> inside",
         "{{ braces }} {% tag %}"]  # fmt: skip


@pytest.mark.parametrize("num_images", [0, 1, 2, 3])
def test_prompt_ids_and_positions_equal_transformers(
    generator, reference, pictures, num_images
) -> None:
    names = ["grace_hopper.jpg", "rocket.jpg", "coffee.png"][:num_images]
    images = [Image.open(io.BytesIO(pictures[n])) for n in names]
    for text in TEXTS:
        inputs = reference.inputs(images, text)
        grids = [tuple(int(v) for v in g) for g in inputs.get("image_grid_thw", [])]
        ids = generator.prompts(one_turn(text, num_images), grids)
        assert ids.tolist() == inputs["input_ids"][0].tolist(), text
        positions, delta = rope_index(ids, grids, generator.image_token, 2)
        if num_images:
            want, want_delta = reference.model.model.get_rope_index(
                inputs["input_ids"],
                inputs["mm_token_type_ids"],
                inputs["image_grid_thw"],
                attention_mask=inputs["attention_mask"],
            )
            want, want_delta = want[:, 0].numpy(), int(want_delta[0, 0])
        else:  # text only: transformers uses 1-D positions on every axis
            want, want_delta = np.arange(len(ids))[None].repeat(3, 0), 0
        assert np.array_equal(positions, want), text
        assert delta == want_delta, text


@pytest.mark.parametrize("token", ["<|image_pad|>", "<|vision_start|>", "<|video_pad|>"])
def test_vision_placeholders_in_the_text_are_refused(generator, token) -> None:
    with pytest.raises(InputError, match=rf"'text_input': holds the reserved token {token}"):
        generator.prompts(one_turn(f"look {token} here", 0), [])
    turns = (("user", ("hi",)), ("assistant", (f"look {token}",)))
    with pytest.raises(InputError, match=r"'messages': messages\[1\]: holds the reserved token"):
        generator.prompts(Conversation(turns, "messages"), [])


PIC, TXT = "image", "text"  # a picture part, a text part (the next of TEXTS)
CONVERSATIONS = {
    "system, two user turns with pictures": [
        ("system", "You answer in one word."), ("user", [PIC, TXT]), ("assistant", "A person."),
        ("user", [TXT, PIC, TXT])],
    "no system, a string content": [("user", "Describe this picture.")],
    "pictures in two turns, no system": [
        ("user", [PIC]), ("assistant", [TXT]), ("user", [PIC, PIC, TXT])],
    "a later system turn, two assistant turns in a row": [
        ("user", [TXT]), ("assistant", "one"), ("assistant", "two"), ("system", [TXT]),
        ("user", [TXT, PIC])],
    "an empty system and empty texts": [("system", ""), ("user", [PIC, TXT, TXT])],
}  # fmt: skip


def _conversation(turns, images):
    """(transformers' messages with the PIL images, the ``messages`` input's JSON)."""
    texts, pictures = iter(TEXTS * 3), iter(images)
    hf, ours = [], []
    for role, content in turns:
        if isinstance(content, str):
            hf.append({"role": role, "content": [{"type": "text", "text": content}]})
            ours.append({"role": role, "content": content})
            continue
        parts = [{"type": "text", "text": next(texts)} if p == TXT else {"type": "image"}
                 for p in content]  # fmt: skip
        hf.append(
            {
                "role": role,
                "content": [
                    {**p, "image": next(pictures)} if p["type"] == "image" else p for p in parts
                ],
            }
        )
        ours.append({"role": role, "content": parts})
    return hf, json.dumps(ours).encode()


@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
def test_conversation_ids_equal_the_processors_chat_template(
    generator, reference, pictures, name
) -> None:
    turns = CONVERSATIONS[name]
    count = sum(1 for _, c in turns if not isinstance(c, str) for p in c if p == PIC)
    names = ["grace_hopper.jpg", "rocket.jpg", "coffee.png"]
    images = [Image.open(io.BytesIO(pictures[names[i % 3]])) for i in range(count)]
    hf, raw = _conversation(turns, images)
    want = reference.processor.apply_chat_template(
        hf, add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="np"
    )
    grids = [tuple(int(v) for v in g) for g in want.get("image_grid_thw", [])]
    ids = generator.prompts(read_messages(raw), grids)
    assert ids.tolist() == want["input_ids"][0].tolist()
    prepared = generator.prepare(request("", [pictures[names[i % 3]] for i in range(count)],
                                         messages=read_messages(raw)))  # fmt: skip
    assert prepared.ids.tolist() == want["input_ids"][0].tolist()


def test_roles_and_image_parts_are_checked(generator) -> None:
    robot = Conversation((("robot", ("hi",)),), "messages")
    with pytest.raises(
        InputError,
        match=r"messages\[0\]: role 'robot' is not one the chat "
        r"template takes \(system, user, assistant\)",
    ):
        generator.prompts(robot, [])
    two = Conversation((("user", (None, None, "hi")),), "messages")
    with pytest.raises(InputError, match="2 image parts, but the 'image' input holds 1 pictures"):
        generator.prompts(two, [(1, 4, 4)])
