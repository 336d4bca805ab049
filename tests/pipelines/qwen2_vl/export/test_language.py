"""The language graph (GroupQueryAttention over an in-place cache) against transformers: its
three modes (new prompts batched and right-padded, a prompt continued after a past, decode
with each row at its own length), and C44: 3,500 tokens of text before a picture, after it
and between two pictures, past any length a trace could have baked in. The M-RoPE positions
are transformers' ``get_rope_index`` (text after a picture resumes at the picture's start
plus the largest of its merged t, h/2, w/2) and the logits of the last token, the prompt
prefilled in chunks of 1,024 as the runtime does, equal transformers' (cosine > 0.999)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch
from PIL import Image

from mmaas.backends.onnxruntime.runtime import OnnxRuntimeEngine
from mmaas.pipelines.qwen2_vl.config import RuntimeConfig
from mmaas.pipelines.qwen2_vl.convert import checkpoint as checkpoints
from mmaas.pipelines.qwen2_vl.export import validate
from mmaas.pipelines.qwen2_vl.runtime.language import LanguageRuns
from mmaas.pipelines.qwen2_vl.runtime.prompt import rope_index

pytestmark = pytest.mark.slow
TEXT = 3500


def test_every_mode_equals_transformers(qwen_vl_export: Path) -> None:
    model = checkpoints.load_model(qwen_vl_export / "checkpoint")
    points = [(1, 1, 0), (3, 29, 0), (1, 1, 517), (4, 1, 40), (1, 50, 300)]
    lines = validate.validate_language(model, 4096, points)  # raises past 2e-5 of the scale
    assert len(lines) == len(points)


def layout(config: RuntimeConfig, where: str, grid_side: int) -> list[int]:
    """Prompt ids: 3,500 text tokens before the picture(s), after, or between two."""
    tokens = config.tokens
    text = [int(t) for t in np.random.default_rng(3).integers(0, 3900, TEXT)]
    picture = [tokens.vision_start, *[tokens.image] * (grid_side // 2) ** 2, tokens.vision_end]
    tail = [11, 12, 13]
    if where == "before":
        return [*text, *picture, *tail]
    if where == "after":
        return [*picture, *text, *tail]
    return [*picture, *text[:1750], *picture, *text[1750:], *tail]


@pytest.mark.parametrize("where", ["before", "after", "between"])
@torch.no_grad()
def test_long_text_around_pictures_keeps_positions_and_logits(qwen_vl_export, where) -> None:
    reference = checkpoints.load_model(qwen_vl_export / "checkpoint")
    config = RuntimeConfig.read(qwen_vl_export / "runtime.json")
    side = 8  # an 8 x 8 patch grid: 16 image tokens
    ids = layout(config, where, side)
    count = ids.count(config.tokens.image) // (side // 2) ** 2
    grids = [(1, side, side)] * count
    image = Image.new("RGB", (side * 14, side * 14), (40, 90, 200))
    processed = reference_pixels(qwen_vl_export, image, count)
    ours, _ = rope_index(np.array(ids), grids, config.tokens.image, 2)
    kinds = (torch.tensor([ids]) == config.tokens.image).int()  # 1 = image token
    theirs, _ = reference.model.get_rope_index(torch.tensor([ids]), kinds,
                                               image_grid_thw=torch.tensor(grids))  # fmt: skip
    assert np.array_equal(ours, theirs[:, 0].numpy())
    assert ours.max() < len(ids) - (count * 12)  # each picture's 16 tokens took 4 positions
    want = reference(input_ids=torch.tensor([ids]), pixel_values=processed, mm_token_type_ids=kinds,
                     image_grid_thw=torch.tensor(grids)).logits[0, -1].numpy()  # fmt: skip
    embeds = np.load(qwen_vl_export / "embed_tokens.npy")[ids]
    visual = reference.model.visual(processed, torch.tensor(grids)).pooler_output.numpy()
    embeds[np.array(ids) == config.tokens.image] = visual
    got = prefill(qwen_vl_export, config, embeds, ours)
    cosine = float(got @ want / (np.linalg.norm(got) * np.linalg.norm(want)))
    assert cosine > 0.999 and int(got.argmax()) == int(want.argmax()), cosine


def reference_pixels(folder: Path, image: Image.Image, count: int) -> torch.Tensor:
    """transformers' processor's pixel_values for ``count`` copies of ``image``."""
    from transformers import Qwen2VLImageProcessorPil

    processor = Qwen2VLImageProcessorPil.from_pretrained(folder / "checkpoint")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    pictures = [Image.open(io.BytesIO(buffer.getvalue())) for _ in range(count)]
    return processor(pictures, return_tensors="pt")["pixel_values"]


def prefill(folder: Path, config: RuntimeConfig, embeds: np.ndarray, positions: np.ndarray
            ) -> np.ndarray:  # fmt: skip
    """The runtime's prefill of one prompt in chunks of 1,024 (the first from 0, then
    continued prompts): the last token's logits."""
    session = ort.InferenceSession(str(folder / "qwen2_vl_language.onnx"),
                                   providers=["CPUExecutionProvider"])  # fmt: skip
    runs = LanguageRuns(OnnxRuntimeEngine(session).bind(), config.language, 4096, 1, "FP32")
    done = 0
    while done < len(embeds):
        n = min(1024, len(embeds) - done)
        out = runs.prefill(0, embeds[None, done : done + n], positions[:, None, done : done + n],
                           [n], past=done)  # fmt: skip
        done += n
    return out.logits()[0].astype(np.float64)
