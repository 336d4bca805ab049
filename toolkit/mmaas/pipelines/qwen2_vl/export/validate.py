"""Checks of an export against transformers: each graph run in ONNX Runtime over its profile
and compared with transformers' own forward on the same random inputs, and the runtime's
tokenizer (``tokenizers`` on tokenizer.json) against ``AutoTokenizer``.

Tolerance: the max abs difference relative to the largest reference value (FP32 with other
summation orders; measured 1e-6 to 4e-6 over the profiles).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import torch
from tokenizers import Tokenizer
from transformers import AutoTokenizer
from transformers.cache_utils import DynamicCache

from mmaas.core.errors import MmaasError
from mmaas.pipelines.qwen2_vl.export.language import language_names, language_sample
from mmaas.pipelines.qwen2_vl.export.vision import sample_inputs

RELATIVE_TOLERANCE = 2e-5
HELD_OUT = [
    "Describe this picture in one sentence.",
    "What is written on the sign?  Answer: «naïve café» — 東京 2024!",
    "\n\n\tdef f(x):\n    return x**2",
    "<|im_start|>user\nhello<|im_end|>\n",
    "Ünïcödé   spaces\r\nand CRLF\u00a0nbsp \U0001f600 emoji",
]


class ValidationError(MmaasError):
    """An exported graph or the tokenizer differs from transformers."""


def check_close(name: str, actual: np.ndarray, expected: np.ndarray, tolerance: float) -> float:
    """Equal shapes and max abs diff <= tolerance x max abs expected; returns the ratio.

    Raises:
        ValidationError: naming the tensor and the difference.
    """
    if actual.shape != expected.shape:
        raise ValidationError(f"{name}: ONNX gives {actual.shape}, transformers {expected.shape}")
    scale = float(np.abs(expected).max()) or 1.0
    relative = float(np.abs(actual - expected).max()) / scale
    if not relative <= tolerance:
        raise ValidationError(f"{name}: differs from transformers by {relative:.2e} of its scale")
    return relative


def session(path: Path) -> ort.InferenceSession:
    """A CPU session on an exported graph."""
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


@torch.no_grad()
def validate_vision(
    path: Path, visual: torch.nn.Module, grid_sets: list[tuple[tuple[int, int, int], ...]],
    tolerance: float = RELATIVE_TOLERANCE,
) -> list[str]:  # fmt: skip
    """Run the vision graph at each grid set (one tuple of (t, h, w) per image) and compare
    ``image_embeds`` with transformers' vision forward; one line per set."""
    engine = session(path)
    lines = []
    for grids in grid_sets:
        pixels, grid = sample_inputs(grids, seed=len(grids))
        expected = visual(pixels, grid).pooler_output.numpy()
        actual = engine.run(None, {"pixel_values": pixels.numpy(), "grid_thw": grid.numpy()})[0]
        rel = check_close(f"image_embeds at grids {grids}", actual, expected, tolerance)
        lines.append(f"vision {grids}: {len(pixels)} patches -> {actual.shape}, rel diff {rel:.1e}")
    return lines


@torch.no_grad()
def validate_language(
    path: Path, model: Any, points: list[tuple[int, int, int, int]],
    tolerance: float = RELATIVE_TOLERANCE,
) -> list[str]:  # fmt: skip
    """Run the language graph at each (batch, seq, past, left_pad) point and compare logits
    and presents with transformers' Qwen2VLTextModel (a DynamicCache filled with the same
    past) + lm_head on the last position. Padding slots are left out of the presents'
    comparison: a fully masked query row computes different garbage in each, unused."""
    config = model.model.language_model.config
    engine = session(path)
    names, _ = language_names(config.num_hidden_layers)
    lines = []
    for batch, seq, past, pad in points:
        sample = language_sample(config, batch, seq, past, seed=batch * 1000 + seq + past, pad=pad)
        actual = engine.run(None, {n: t.numpy() for n, t in zip(names, sample, strict=True)})
        cache = DynamicCache(config=config)
        for i in range(config.num_hidden_layers):
            if past:
                cache.update(sample[3 + 2 * i], sample[4 + 2 * i], i)
        out = model.model.language_model(
            inputs_embeds=sample[0],
            attention_mask=sample[1],
            position_ids=sample[2],
            cache=cache if past else None,
            use_cache=True,
        )
        where = f"B={batch} S={seq} past={past} pad={pad}"
        logits = model.lm_head(out.last_hidden_state[:, -1:, :]).numpy()
        worst = check_close(f"logits at {where}", actual[0], logits, tolerance)
        real = sample[1].numpy().astype(bool)[:, None, :, None]
        for i, layer in enumerate(out.cache.layers):
            for j, tensor in enumerate((layer.keys, layer.values)):
                name = f"present.{i}.{('key', 'value')[j]} at {where}"
                got, want = actual[1 + 2 * i + j] * real, tensor.numpy() * real
                worst = max(worst, check_close(name, got, want, tolerance))
        lines.append(f"language {where}: rel diff {worst:.1e}")
    return lines


def validate_tokenizer(checkpoint: Path, samples: Sequence[str] = ()) -> str:
    """``tokenizers`` on tokenizer.json (what the runtime uses) gives AutoTokenizer's ids
    and decodings on held-out texts, this file, and the text files ``samples`` (the first
    20000 characters of each).

    Raises:
        ValidationError: naming the first text that differs.
    """
    reference = AutoTokenizer.from_pretrained(checkpoint)
    raw = Tokenizer.from_file(str(checkpoint / "tokenizer.json"))
    texts = [*HELD_OUT, Path(__file__).read_text()]
    texts += [Path(f).read_text(errors="replace")[:20000] for f in samples]
    for text in texts:
        expected = reference(text)["input_ids"]
        ids = raw.encode(text, add_special_tokens=True).ids
        if ids != expected:
            raise ValidationError(f"tokenizers and AutoTokenizer differ on {text[:40]!r}")
        if reference.decode(expected) != raw.decode(ids, skip_special_tokens=False):
            raise ValidationError(f"tokenizers and AutoTokenizer decode {text[:40]!r} apart")
    return f"tokenizer: same ids as AutoTokenizer on {len(texts)} texts"


def language_points(context: int, max_batch: int) -> list[tuple[int, int, int, int]]:
    """(batch, seq, past, left_pad) points over the language profile: prefill lengths,
    decode at short and full caches, padded batches, chunked prefill."""
    return [
        (1, 1, 0, 0),
        (1, 2, 0, 0),
        (1, 300, 0, 0),
        (2, 37, 0, 5),
        (1, 1, 1, 0),
        (1, 1, 517, 0),
        (max_batch, 1, 100, 40),
        (2, 3, 5, 2),
        (1, 1, context - 1, 0),
    ]


def vision_grid_sets(max_patches: int, max_images: int) -> list[tuple[tuple[int, int, int], ...]]:
    """Grid sets over the vision profile: one 56x56 image (4 patches), odd aspect ratios,
    several images in one request, the most images, and the most patches."""
    side = int(max_patches**0.5) // 2 * 2
    return [
        ((1, 2, 2),),
        ((1, 8, 12),),
        ((1, 4, 120),),
        ((1, 12, 8), (1, 4, 6), (1, 2, 2)),
        tuple((1, 2, 2) for _ in range(max_images)),
        ((1, side, side),),
    ]
