"""``language_gate.npz``: the reference generation the build's generation gate compares the
language engine with (:mod:`mmaas.stage.generation` gives the format), made with
transformers at FP32 on the checkpoint: 8 prompts (two pictures, each with and without the
other, and text alone, under four questions), each the embeddings and M-RoPE positions the
runtime gives (``embed_tokens`` rows with the vision encoder's embeddings at the image
tokens; ``get_rope_index``), then :data:`STEPS` greedy tokens (plain argmax: the gate
compares top-1 choices), their embeddings and positions, and the first-step logits. Runs
on the GPU when torch sees one (a 2B model's 256 forward passes), else on the CPU.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from transformers.cache_utils import DynamicCache

from mmaas.pipelines.qwen2_vl.export.onnx_io import atomic_write
from mmaas.pipelines.qwen2_vl.export.reference import Reference
from mmaas.pipelines.qwen2_vl.runtime.prompt import rope_index

STEPS = 32
QUESTIONS = (
    "Describe this picture.",
    "What is the person in the image holding, and why?",
    "Write a Python function that adds two numbers.",
    "List three colours you can see.",
)


def pictures() -> list[list[Image.Image]]:
    """The prompts' picture sets, made here (a conversion needs no file beside it): a
    448x448 plain picture and a 336x336 colour ramp, each alone, both, and none (cycled over
    the questions: 8 prompts)."""
    first, second = Image.new("RGB", (448, 448), (200, 120, 40)), _gradient()
    return [[first], [second], [first, second], []]


def _gradient() -> Image.Image:
    ramp = np.linspace(0, 255, 336, dtype=np.uint8)
    rgb = np.stack([np.tile(ramp, (336, 1)), np.tile(ramp[:, None], (1, 336)),
                    np.full((336, 336), 90, np.uint8)], axis=-1)  # fmt: skip
    return Image.fromarray(rgb)


@torch.no_grad()
def write_gate_samples(checkpoint: Path, output: Path) -> str:
    """Write the gate's sample file ``output``; returns a one-line summary."""
    reference = Reference(checkpoint)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = reference.model.float().to(device)
    arrays: dict[str, Any] = {}
    sets = pictures()
    for i in range(8):
        images, question = sets[i % 4], QUESTIONS[i // 2 % 4]
        embeds, positions, length = prompt_inputs(reference, model, images, question, device)
        tokens, first = [], None
        cache = DynamicCache(config=model.model.language_model.config)
        step, at = embeds, positions
        for _ in range(STEPS):
            out = model.model.language_model(inputs_embeds=step, position_ids=at, cache=cache,
                                              use_cache=True)  # fmt: skip
            logits = model.lm_head(out.last_hidden_state[:, -1])[0].float()
            first = logits.cpu().numpy() if first is None else first
            token = int(torch.argmax(logits))
            tokens.append(token)
            step = model.model.language_model.embed_tokens(torch.tensor([[token]], device=device))
            at = positions[:, :, -1:] + 1
            embeds = torch.cat([embeds, step], dim=1)
            positions = torch.cat([positions, at], dim=2)
        arrays.update({f"embeds_{i}": embeds[0, :-1].cpu().numpy(),
                       f"positions_{i}": positions[:, 0, :-1].cpu().numpy(),
                       f"prompt_{i}": np.int64(length), f"tokens_{i}": np.array(tokens),
                       f"logits_{i}": first})  # fmt: skip
    buffer = io.BytesIO()
    np.savez(buffer, count=np.int64(8), **arrays)
    atomic_write(output, buffer.getvalue())
    return f"wrote {output.name}: 8 prompts x {STEPS} greedy tokens at FP32 ({device})"


def prompt_inputs(reference: Reference, model: Any, images: list[Image.Image], question: str,
                  device: str) -> tuple[torch.Tensor, torch.Tensor, int]:  # fmt: skip
    """inputs_embeds [1, L, H] and position_ids [3, 1, L] of one prompt, as the runtime
    builds them, and L."""
    inputs = reference.inputs(images, question)
    ids = inputs["input_ids"].to(device)
    embeds = model.model.language_model.embed_tokens(ids)
    grid = inputs.get("image_grid_thw")
    if grid is not None:
        pixels = inputs["pixel_values"].to(device)
        image = model.model.visual(pixels, grid.to(device)).pooler_output
        mask = ids[0] == model.config.image_token_id
        embeds[0, mask] = image.to(embeds.dtype)
    grids = [] if grid is None else [(int(t), int(h), int(w)) for t, h, w in grid.tolist()]
    rope, _ = rope_index(ids[0].cpu().numpy(), grids, model.config.image_token_id,
                         model.config.vision_config.spatial_merge_size)  # fmt: skip
    positions = torch.from_numpy(rope)[:, None, :].to(device)
    return embeds, positions, ids.shape[1]
