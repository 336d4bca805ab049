"""The prompt's token ids and Qwen2-VL's 3-axis M-RoPE positions, as transformers'
``Qwen2VLProcessor`` (after ``apply_chat_template``) and ``Qwen2VLModel.get_rope_index`` give
them, with ``tokenizers`` only (no jinja2: the chat template was rendered at export time into
a prefix, an image part and a suffix, proved equal for 0..max_images images).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mmaas.core.errors import InputError
from mmaas.pipelines.qwen2_vl.config import Prompt, Tokens

Grid = tuple[int, int, int]


class PromptBuilder:
    """Text + image grids -> prompt ids INT64 [L]: one user turn holding the images, then the
    text, with the generation prompt (``prefix + image * n + text + suffix``). The string is
    tokenized with one ``<|image_pad|>`` per image, then each is repeated t*h*w/merge^2
    times: added tokens split the text before the BPE, so this equals tokenizing the
    processor's expanded string."""

    def __init__(self, tokenizer: Any, prompt: Prompt, tokens: Tokens, merge: int) -> None:
        self.tokenizer = tokenizer
        self.prefix, self.image, self.suffix = prompt.prefix, prompt.image, prompt.suffix
        self.image_token = tokens.image
        self.refused = tokens.refused_in_text
        self.merge_area = merge * merge

    def __call__(self, text: str, grids: Sequence[Grid]) -> np.ndarray:
        """INT64 [L] prompt ids.

        Raises:
            InputError: the text holds a vision placeholder token (it would put image
                tokens where no image is; transformers' processor fails on it too).
        """
        for token in self.refused:
            if token in text:
                raise InputError(
                    f"input 'text_input': holds the reserved token {token}; images go in "
                    "the 'image' input, the prompt places them"
                )
        prompt = self.prefix + self.image * len(grids) + text + self.suffix
        ids = np.array(self.tokenizer.encode(prompt, add_special_tokens=True).ids, np.int64)
        counts = np.ones(len(ids), np.int64)
        where = np.flatnonzero(ids == self.image_token)
        if len(where) != len(grids):
            raise InputError(f"input 'text_input': {len(where)} image tokens, {len(grids)} images")
        counts[where] = [t * h * w // self.merge_area for t, h, w in grids]
        return np.repeat(ids, counts)


def rope_index(
    ids: np.ndarray, grids: Sequence[Grid], image_token: int, merge: int
) -> tuple[np.ndarray, int]:
    """M-RoPE position ids of one unpadded prompt (``get_rope_index``): text runs count up
    on all three axes; an image run of grid (t, h, w) gets (t', h', w') = (t, h/merge,
    w/merge) positions offset by the position reached, after which counting goes on from
    that offset + max(t', h', w').

    Returns:
        positions INT64 [3, L] and the rope delta (max position + 1 - L): the decode step
        with n tokens in the cache uses position n + delta on every axis.
    """
    is_image = ids == image_token
    starts = np.flatnonzero(np.diff(np.concatenate([[0], is_image.astype(np.int8)])) == 1)
    positions = np.empty((3, len(ids)), np.int64)
    cursor, index, grid_iter = 0, 0, iter(grids)
    for start in [*starts.tolist(), len(ids)]:
        text_len = start - index
        positions[:, index:start] = np.arange(cursor, cursor + text_len)
        cursor += text_len
        if start == len(ids):
            break
        t, h, w = next(grid_iter)
        h, w = h // merge, w // merge
        tt, hh, ww = np.meshgrid(np.arange(t), np.arange(h), np.arange(w), indexing="ij")
        run = t * h * w
        positions[:, start : start + run] = np.stack([tt, hh, ww]).reshape(3, -1) + cursor
        cursor += max(t, h, w)
        index = start + run
    return positions, int(positions.max()) + 1 - len(ids) if len(ids) else 0
