"""Prompt ids equal Qwen2VLProcessor's (after apply_chat_template) and M-RoPE positions equal
Qwen2VLModel.get_rope_index, for 0..3 images and texts with special characters; the vision
placeholder tokens are refused in user text."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from mmaas.core.errors import InputError
from mmaas.pipelines.qwen2_vl.runtime.prompt import rope_index

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
        ids = generator.prompts(text, grids)
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
        generator.prompts(f"look {token} here", [])
