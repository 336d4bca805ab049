"""The prompt's token ids and Qwen2-VL's 3-axis M-RoPE positions, as transformers'
``Qwen2VLProcessor`` (after ``apply_chat_template``) and ``Qwen2VLModel.get_rope_index`` give
them, with ``tokenizers`` only (no jinja2: the chat template's turn structure was read at
export time and proved equal to the template on conversations of every role, several
turns and 0..max_images pictures: :class:`mmaas.pipelines.qwen2_vl.config.ChatTemplate`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mmaas.core.errors import InputError
from mmaas.pipelines.qwen2_vl.config import ChatTemplate, Tokens
from mmaas.pipelines.qwen2_vl.runtime.conversation import Conversation

Grid = tuple[int, int, int]


class PromptBuilder:
    """A conversation + image grids -> prompt ids INT64 [L]: the template's rendering with
    the generation prompt. The string is tokenized with one ``<|image_pad|>`` per image,
    then each is repeated t*h*w/merge^2 times: added tokens split the text before the BPE,
    so this equals tokenizing the processor's expanded string."""

    def __init__(self, tokenizer: Any, template: ChatTemplate, tokens: Tokens, merge: int) -> None:
        self.tokenizer, self.template = tokenizer, template
        self.image_token = tokens.image
        self.refused = tokens.refused_in_text
        self.merge_area = merge * merge

    def __call__(self, conversation: Conversation, grids: Sequence[Grid]) -> np.ndarray:
        """INT64 [L] prompt ids.

        Raises:
            InputError: a role the template does not take, image parts that do not number
                the pictures, or a text holding a vision placeholder token (it would put
                image tokens where no image is; transformers' processor fails on it too).
        """
        source = conversation.source
        where = (lambda i: "") if source == "text_input" else (lambda i: f"messages[{i}]: ")
        for index, (role, parts) in enumerate(conversation.turns):
            if role not in self.template.roles:
                raise InputError(
                    f"input '{source}': {where(index)}role {role!r:.40} is not one the chat "
                    f"template takes ({', '.join(self.template.roles)})"
                )
            for token in self.refused:
                if any(part is not None and token in part for part in parts):
                    raise InputError(
                        f"input '{source}': {where(index)}holds the reserved token {token}; "
                        "images go in the 'image' input, the prompt places them"
                    )
        if conversation.images != len(grids):
            raise InputError(
                f"input '{source}': {conversation.images} image parts, but the 'image' input "
                f"holds {len(grids)} pictures; send one image part per picture, in order"
            )
        prompt = self.template.render(conversation.turns)
        ids = np.array(self.tokenizer.encode(prompt, add_special_tokens=True).ids, np.int64)
        counts = np.ones(len(ids), np.int64)
        where_images = np.flatnonzero(ids == self.image_token)
        if len(where_images) != len(grids):
            raise InputError(
                f"input '{source}': {len(where_images)} image tokens, {len(grids)} images"
            )
        counts[where_images] = [t * h * w // self.merge_area for t, h, w in grids]
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
