"""The export's side files (the qwen2-vl pipeline's assets): ``embed_tokens.npy``, a copy of
``tokenizer.json`` and ``runtime.json``, everything the torch-free runtime reads besides the
two engines, so that it needs no transformers config class and no jinja2.

runtime.json is :class:`mmaas.pipelines.qwen2_vl.config.RuntimeConfig` (its docstring lists
the keys), filled here from the checkpoint's config.json, generation_config.json,
preprocessor_config.json and chat template, and the sha256 of the files converted beside it.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from transformers import AutoTokenizer, Qwen2VLForConditionalGeneration, Qwen2VLImageProcessorPil

from mmaas.core.errors import MmaasError
from mmaas.core.hashing import file_digests
from mmaas.pipelines.qwen2_vl.config import (
    SCHEMA,
    ChatTemplate,
    Generation,
    ImageSettings,
    LanguageDims,
    RuntimeConfig,
    Tokens,
    Turn,
)
from mmaas.pipelines.qwen2_vl.export.onnx_io import atomic_write
from mmaas.pipelines.qwen2_vl.export.spec_file import Profile

TEXT_SENTINEL = "\u27e6mmaas-text\u27e7"  # a string no template alters or contains
PROOF_TEXTS = [
    TEXT_SENTINEL,
    "Describe this picture.",
    "",
    " lead\nand trail \n",
    "{{ not jinja }} {% raw %} 'quotes' \"double\" \\ back",
    "<|im_end|>x",
]
REFUSED_IN_TEXT = (
    "<|image_pad|>",
    "<|video_pad|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
)
GRAPHS = ("qwen2_vl_vision.onnx", "qwen2_vl_language.onnx")


class SideFileError(MmaasError):
    """The checkpoint's chat template or processor settings cannot be served as is."""


def hf_messages(turns: Sequence[Turn]) -> list[dict[str, Any]]:
    """Turns (role, parts: text or None for a picture) as transformers' chat messages."""
    return [
        {"role": role, "content": [
            {"type": "image"} if part is None else {"type": "text", "text": part} for part in parts
        ]}
        for role, parts in turns
    ]  # fmt: skip


def proof_conversations(max_images: int) -> list[list[Turn]]:
    """The conversations a template's structure is proved on: every text of
    :data:`PROOF_TEXTS` alone in a user turn with 0..max_images pictures before it; with and
    without a system turn, several turns (every role, a later system turn, two assistant
    turns in a row), pictures between texts and in several user turns."""
    out: list[list[Turn]] = []
    for n in range(max_images + 1):
        for text in PROOF_TEXTS:
            out.append([("user", (*[None] * n, text))])
    a, b = PROOF_TEXTS[1], PROOF_TEXTS[3]
    out += [
        [("system", (a,)), ("user", (None, b))],
        [("system", ("",)), ("user", (b, None, a, None)), ("assistant", (a,)), ("user", (a,))],
        [("user", (a,)), ("assistant", (b,)), ("assistant", (a,)), ("system", (b,)),
         ("user", (None,) * min(2, max_images))],
        [("user", ()), ("assistant", ("",)), ("user", (PROOF_TEXTS[4], None, PROOF_TEXTS[5]))],
        [("system", (a, b)), ("user", (None,) * max_images)],
    ]  # fmt: skip
    return out


def chat_template(tokenizer: Any, max_images: int) -> ChatTemplate:
    """Read the checkpoint's chat template's turn structure (:class:`ChatTemplate`) from
    renderings of sentinel conversations, then prove it: ``ChatTemplate.render`` equals
    ``apply_chat_template(add_generation_prompt=True)`` on every conversation of
    :func:`proof_conversations` (texts with quotes, braces, newlines, special tokens).

    Raises:
        SideFileError: the template is not of that structure (e.g. ``add_vision_id``
            numbering), naming the conversation whose rendering differs.
    """

    def render(turns: Sequence[Turn], generation: bool = True) -> str:
        rendered: str = tokenizer.apply_chat_template(
            hf_messages(turns), tokenize=False, add_generation_prompt=generation
        )
        return rendered

    s, u = TEXT_SENTINEL, TEXT_SENTINEL + "u"
    pair = render([("system", (s,)), ("user", (u,))], False)
    opening, _, rest = pair.partition(s)
    at = opening.rfind("system")
    turn_start, role_end = opening[:at], opening[at + len("system") :]
    turn_end = rest[: rest.find(turn_start + "user" + role_end + u)]
    alone = render([("user", (u,))], False)
    first = alone[: len(alone) - len(turn_start + "user" + role_end + u + turn_end)]
    head = turn_start + "system" + role_end
    default = first[len(head) : len(first) - len(turn_end)] if first.startswith(head) else ""
    with_image = render([("user", (None, u))], False)
    image = with_image[len(first + turn_start + "user" + role_end) :].partition(u)[0]
    template = ChatTemplate(
        roles=("system", "user", "assistant"), turn_start=turn_start, role_end=role_end,
        turn_end=turn_end, default_system=default, image=image,
        generation=render([("user", (u,))])[len(alone) :],
    )  # fmt: skip
    for turns in proof_conversations(max_images):
        expected, got = render(turns), template.render(turns)
        if got != expected:
            raise SideFileError(
                f"chat template: {turns!r} renders {expected!r}, the turn structure read "
                f"from it gives {got!r}; this converter serves ChatML-shaped templates"
            )
    return template


def runtime_config(
    checkpoint: Path,
    output: Path,
    model: Qwen2VLForConditionalGeneration,
    profile: Profile,
    exporter: str,
) -> RuntimeConfig:
    """runtime.json of the checkpoint and the files converted into ``output``, stamped with
    the ``exporter`` code's digest. ``max_pixels`` is the preprocessor's, lowered to the
    vision profile's patches when it is larger (a real checkpoint's 12845056 = 65536
    patches), like qwen-vl-utils' ``max_pixels``: compare with transformers' processor at
    the same ``max_pixels``."""
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    processor = Qwen2VLImageProcessorPil.from_pretrained(checkpoint)
    config, gen = model.config, model.generation_config
    text: Any = config.text_config
    eos = gen.eos_token_id if isinstance(gen.eos_token_id, list) else [gen.eos_token_id]
    files = (*GRAPHS, "embed_tokens.npy", "tokenizer.json")
    return RuntimeConfig(
        schema=SCHEMA,
        files={name: _sha256(output / name) for name in files},
        image=ImageSettings(
            patch_size=processor.patch_size,
            temporal_patch_size=processor.temporal_patch_size,
            merge_size=processor.merge_size,
            min_pixels=processor.size["shortest_edge"],
            max_pixels=min(
                processor.size["longest_edge"], profile.max_patches * processor.patch_size**2
            ),
            resample=int(processor.resample),
            rescale_factor=processor.rescale_factor,
            image_mean=_rgb(processor.image_mean),
            image_std=_rgb(processor.image_std),
        ),
        tokens=Tokens(
            image=config.image_token_id,
            vision_start=config.vision_start_token_id,
            vision_end=config.vision_end_token_id,
            eos=tuple(int(t) for t in eos),
            pad=gen.pad_token_id,
            refused_in_text=REFUSED_IN_TEXT,
        ),
        prompt=chat_template(tokenizer, profile.max_images),
        prompt_proved_images=profile.max_images,
        generation=Generation(repetition_penalty=float(gen.repetition_penalty or 1.0)),
        language=LanguageDims(
            num_layers=text.num_hidden_layers,
            kv_heads=text.num_key_value_heads,
            head_dim=text.hidden_size // text.num_attention_heads,
            hidden_size=text.hidden_size,
            vocab_size=text.vocab_size,
        ),
        exporter=exporter,
    )


def write_side_files(
    checkpoint: Path,
    output: Path,
    model: Qwen2VLForConditionalGeneration,
    profile: Profile,
    exporter: str,
) -> RuntimeConfig:
    """Write embed_tokens.npy (FP32 [vocab, hidden], the text-token embedding table, looked
    up row by row in numpy: bit-identical to nn.Embedding), tokenizer.json, then
    runtime.json (it hashes the others, so it comes last). Returns runtime.json's config.

    Raises:
        SideFileError: the chat template cannot be pre-rendered.
        IntegrityError: a runtime.json field would break its rule (e.g. no pad token id).
    """
    table = model.model.language_model.embed_tokens.weight.detach().float().numpy()
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(table))
    atomic_write(output / "embed_tokens.npy", buffer.getvalue())
    atomic_write(output / "tokenizer.json", (checkpoint / "tokenizer.json").read_bytes())
    config = runtime_config(checkpoint, output, model, profile, exporter)
    config.write(output / "runtime.json")
    return config


def _sha256(path: Path) -> str:
    """The file's sha256, hex."""
    return file_digests(path)["sha256"].removeprefix("sha256:")


def _rgb(values: Any) -> tuple[float, float, float]:
    """A per-channel (R, G, B) setting of the image processor."""
    red, green, blue = values
    return float(red), float(green), float(blue)
