"""Checks of an export against transformers: each graph run in ONNX Runtime over its profile
and compared with transformers' own forward on the same random inputs, and the runtime's
tokenizer (``tokenizers`` on tokenizer.json) against ``AutoTokenizer``.

Tolerance: the max abs difference relative to the largest reference value (FP32 with other
summation orders; measured 1e-6 to 4e-6 over the profiles).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import torch
from tokenizers import Tokenizer
from transformers import AutoTokenizer

from mmaas.core import decoder
from mmaas.core.errors import MmaasError
from mmaas.pipelines.qwen2_vl.export import language
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
    model: Any, capacity: int, points: list[tuple[int, int, int]],
    tolerance: float = RELATIVE_TOLERANCE,
) -> list[str]:  # fmt: skip
    """Write the language graph in FP32 (a temp file) and run it, its cache bound in place
    as the runtime binds it, at each (batch, seq, past) point: each row first gets ``past``
    tokens (a prompt continued from 0), then a run of ``seq`` new tokens (batch > 1: new
    prompts, right-padded to lengths seq, seq - 1, ...; batch 1: a continued prompt; seq 1:
    decode). Each row's logits must equal transformers' Qwen2VLTextModel + lm_head over
    the row's whole sequence (random embeddings and increasing M-RoPE positions), and the
    top candidates its largest logits; one line per point (points past ``capacity`` are
    left out)."""
    config = model.model.language_model.config
    layers, kv, head_dim, width = language.dims(config)
    lines = []
    with tempfile.TemporaryDirectory(prefix="qwen2-vl-language-") as temp:
        path = Path(temp) / "language.onnx"
        language.export_language(model, path, "fp32", capacity)
        engine = session(path)
        for batch, seq, past in [p for p in points if p[1] + p[2] <= capacity]:
            g = np.random.default_rng(batch * 1000 + seq + past)
            cache = [np.zeros((batch, kv, capacity, head_dim), np.float32)
                     for _ in range(2 * layers)]  # fmt: skip
            lengths = [seq] if batch == 1 or seq == 1 else [max(1, seq - r) for r in range(batch)]
            lengths += [lengths[-1]] * (batch - len(lengths))
            total = [past + n for n in lengths]
            embeds = (g.standard_normal((batch, max(total), width)) * 0.1).astype(np.float32)
            offsets = g.integers(0, 5, (3, batch, 1))
            positions = np.arange(max(total))[None, None, :] + offsets
            for row in range(batch if past else 0):  # each row's past: a prompt from 0
                run_bound(engine, embeds[row : row + 1, :past], positions[:, row : row + 1, :past],
                          [past], [c[row : row + 1] for c in cache], 0)  # fmt: skip
            new = np.zeros((batch, seq, width), np.float32)
            new_positions = np.zeros((3, batch, seq), np.int64)
            for row, n in enumerate(lengths):
                new[row, :n] = embeds[row, past : past + n]
                new_positions[:, row, :n] = positions[:, row, past : past + n]
            logits, top_ids = run_bound(engine, new, new_positions, lengths, cache, past)
            worst = 0.0
            for row, n in enumerate(total):
                out = model.model.language_model(
                    inputs_embeds=torch.from_numpy(embeds[row : row + 1, :n]),
                    position_ids=torch.from_numpy(positions[:, row : row + 1, :n]),
                    use_cache=False,
                )
                want = model.lm_head(out.last_hidden_state[:, -1]).numpy()[0]
                where = f"B={batch} S={seq} past={past} row {row}"
                worst = max(worst, check_close(f"logits at {where}", logits[row], want, tolerance))
                if set(top_ids[row, :5]) != set(np.argsort(-logits[row], kind="stable")[:5]):
                    raise ValidationError(f"top_ids at {where} are not its largest logits")
            lines.append(f"language B={batch} S={seq} past={past}: rel diff {worst:.1e}")
    return lines


def run_bound(engine: ort.InferenceSession, embeds: np.ndarray, positions: np.ndarray,
              lengths: Sequence[int], cache: list[np.ndarray], past: int
              ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """One run of the language graph with ``cache`` (host arrays [batch, ...]) bound as both
    past and present; returns logits FP32 [batch, vocab] and top_ids INT64 [batch, K]."""
    binding = engine.io_binding()
    lens = np.asarray(lengths, np.int64)
    feeds = {decoder.EMBEDS: embeds, decoder.POSITIONS: positions.astype(np.int64),
             decoder.SEQLENS: (lens + past - 1).astype(np.int32),
             decoder.LOGITS_INDEX: lens - 1}  # fmt: skip
    for name, array in feeds.items():
        binding.bind_cpu_input(name, np.ascontiguousarray(array))
    binding.bind_output(decoder.LOGITS, "cpu")
    binding.bind_output(decoder.TOP_IDS, "cpu")
    layers = len(cache) // 2
    for past_name, present, array in zip(decoder.past_names(layers), decoder.present_names(layers),
                                         cache, strict=True):  # fmt: skip
        for bind, name in ((binding.bind_input, past_name), (binding.bind_output, present)):
            bind(name, "cpu", 0, np.float32, list(array.shape), array.ctypes.data)
    engine.run_with_iobinding(binding)
    logits, top_ids = binding.copy_outputs_to_cpu()[:2]
    return logits, top_ids


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


def language_points(chunk: int, max_batch: int) -> list[tuple[int, int, int]]:
    """(batch, seq, past) points over the language modes: a single token, prompts from 0
    (one, and batched with right padding), decode after a short and a long past (batched),
    a prompt continued after a past, and the profile's largest chunk (last: slow)."""
    return [
        (1, 1, 0),
        (1, 37, 0),
        (3, 29, 0),
        (1, 1, 517),
        (max_batch, 1, 40),
        (1, 50, 300),
        (1, chunk, 0),
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
