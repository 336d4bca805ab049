"""The Qwen2-VL vision encoder from ``transformers``, and a traceable forward of it.

``Qwen2VisionTransformerPretrainedModel`` computes the rotary position ids and the per-frame
attention segments from ``grid_thw.tolist()`` and splits attention by those Python lengths,
so neither a trace nor ``torch.export`` can keep them symbolic. :class:`TraceableVisionEncoder`
runs the same weights with the same maths, but computes the positions and a block-diagonal
attention mask from ``grid_thw`` with tensor ops (:func:`grid_layout`), so the exported graph
holds for every number of patches and images. Used by ``scripts/export_qwen_vl.py``.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors import safe_open
from transformers import Qwen2VLConfig, Qwen2VLVisionConfig
from transformers.models.qwen2_vl.modeling_qwen2_vl import (
    Qwen2VisionTransformerPretrainedModel,
    Qwen2VLVisionBlock,
    apply_rotary_pos_emb_vision,
)

PATCH_FEATURES = 3 * 2 * 14 * 14  # in_channels x temporal_patch_size x patch_size^2


class ExportError(Exception):
    """The checkpoint cannot be used or the export does not match PyTorch."""


def small_config(
    depth: int = 2,
    embed_dim: int = 64,
    num_heads: int = 4,
    hidden_size: int = 128,
    init_std: float = 0.3,
) -> Qwen2VLVisionConfig:
    """A small vision config of the real architecture: same patch (14), temporal patch (2)
    and spatial merge (2) sizes, so the inputs are exactly the real model's. ``init_std``
    is large enough that attention is far from uniform, so a wrong position layout or
    mask shows up in validation."""
    return Qwen2VLVisionConfig(
        depth=depth,
        embed_dim=embed_dim,
        num_heads=num_heads,
        hidden_size=hidden_size,
        mlp_ratio=2,
        initializer_range=init_std,
    )


def random_model(config: Qwen2VLVisionConfig, seed: int) -> Qwen2VisionTransformerPretrainedModel:
    """A randomly initialised encoder in eval mode; the same seed gives the same weights."""
    torch.manual_seed(seed)
    return Qwen2VisionTransformerPretrainedModel(config).float().eval()


def load_checkpoint(directory: Path) -> Qwen2VisionTransformerPretrainedModel:
    """The vision tower of a local Qwen2-VL checkpoint in FP32, without loading the language
    model: ``config.json``'s ``vision_config`` as transformers reads it (legacy keys such as
    ``in_chans`` included; local files only) and the ``*visual.*`` tensors of its
    ``*.safetensors`` files (prefix ``visual.`` or ``model.visual.``), in any dtype.

    Raises:
        ExportError: no config.json, not a Qwen2-VL config, no visual tensors, or weights
            that do not fit the config.
    """
    config_file = directory / "config.json"
    if not config_file.is_file():
        raise ExportError(f"{config_file}: not found; --checkpoint takes a Qwen2-VL folder")
    try:
        config = Qwen2VLConfig.from_pretrained(directory, local_files_only=True).vision_config
    except (OSError, ValueError, TypeError) as exc:
        raise ExportError(f"{config_file}: not a Qwen2-VL config ({exc})") from exc
    model = Qwen2VisionTransformerPretrainedModel(config).float().eval()
    weights = {}
    for shard in sorted(directory.glob("*.safetensors")):
        with safe_open(str(shard), framework="pt") as tensors:
            for key in tensors.keys():  # noqa: SIM118 (safe_open is not a dict)
                if "visual." in key:
                    weights[key.split("visual.", 1)[1]] = tensors.get_tensor(key).float()
    if not weights:
        raise ExportError(f"{directory}: no 'visual.*' tensors in any *.safetensors file")
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if missing or unexpected:
        raise ExportError(
            f"{directory}: vision weights do not fit the config: "
            f"missing {missing[:3]}, unexpected {unexpected[:3]}"
        )
    return model


def grid_layout(
    grid_thw: torch.Tensor, num_patches: int | torch.SymInt, merge: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per patch, its rotary position (row, column) and its attention segment (one per frame),
    in the processor's patch order (images, then frames, then merge blocks row-major, then
    the ``merge x merge`` patches of a block), with tensor ops only.

    Args:
        grid_thw: INT64 [num_images, 3]. Values are clamped (t >= 1, h and w >= merge) so
            inconsistent input gives wrong numbers, never a division by zero; patches past
            the grid's total belong to the last image.
        num_patches: the length of ``pixel_values``.
        merge: spatial merge size (2).

    Returns:
        position_ids INT64 [num_patches, 2] and segment_ids INT64 [num_patches].
    """
    t = grid_thw[:, 0].clamp(min=1)
    h = grid_thw[:, 1].clamp(min=merge)
    w = grid_thw[:, 2].clamp(min=merge)
    frame = h * w
    ends = (t * frame).cumsum(0)
    patch = torch.arange(num_patches, device=grid_thw.device)
    image = (patch[:, None] >= ends[None, :]).sum(1).clamp(max=grid_thw.shape[0] - 1)
    local = patch - (ends - t * frame)[image]
    segment = (t.cumsum(0) - t)[image] + local // frame[image]
    in_frame = local % frame[image]
    block, in_block = in_frame // (merge * merge), in_frame % (merge * merge)
    blocks_per_row = w[image] // merge
    row = (block // blocks_per_row) * merge + in_block // merge
    column = (block % blocks_per_row) * merge + in_block % merge
    return torch.stack([row, column], dim=-1), segment


def block_forward(
    block: Qwen2VLVisionBlock,
    hidden: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    mask: torch.Tensor,
) -> torch.Tensor:
    """One vision block as transformers computes it, with the per-frame attention expressed
    as an additive mask FP32 [num_patches, num_patches] (0 inside a frame, the most negative
    float across frames) instead of a split by Python lengths.

    Attention is written as MatMul -> Add -> Softmax -> MatMul, the pattern TensorRT fuses
    into one attention kernel, with no NaN guard (every row attends to at least itself):
    ONNX Runtime then holds two [heads, N, N] FP32 tensors per block at most."""
    attn = block.attn
    query, key, value = (
        attn.qkv(block.norm1(hidden))
        .reshape(hidden.shape[0], 3, attn.num_heads, -1)
        .permute(1, 0, 2, 3)
        .unbind(0)
    )
    query, key = apply_rotary_pos_emb_vision(query, key, cos, sin)
    query, key, value = (x.transpose(0, 1) for x in (query, key, value))  # [heads, N, dim]
    scores = torch.matmul(query * attn.scaling, key.transpose(1, 2)) + mask
    attended = torch.matmul(torch.softmax(scores, dim=-1), value)
    hidden = hidden + attn.proj(attended.transpose(0, 1).reshape(hidden.shape[0], -1))
    return hidden + block.mlp(block.norm2(hidden))


class TraceableVisionEncoder(torch.nn.Module):
    """The encoder's forward with the data-dependent parts in tensor ops (same weights)."""

    def __init__(self, encoder: Qwen2VisionTransformerPretrainedModel) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
        """pixel_values FP32 [N, 1176], grid_thw INT64 [I, 3] -> FP32 [N / 4, hidden]."""
        enc = self.encoder
        positions, segments = grid_layout(grid_thw, pixel_values.shape[0], enc.spatial_merge_size)
        hidden = enc.patch_embed(pixel_values)
        cos, sin = enc.rotary_pos_emb(hidden, positions)
        same_frame = segments[:, None] == segments[None, :]
        mask = torch.where(same_frame, 0.0, torch.finfo(torch.float32).min)
        for block in enc.blocks:
            hidden = block_forward(block, hidden, cos, sin, mask)
        return enc.merger(hidden)


class PlainEncoder(torch.nn.Module):
    """transformers' own forward, returning only the merged embeddings (for the trace)."""

    def __init__(self, encoder: Qwen2VisionTransformerPretrainedModel) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
        return self.encoder(pixel_values, grid_thw).pooler_output


def sample_inputs(
    grids: tuple[tuple[int, int, int], ...], seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random pixel_values FP32 [sum t*h*w, 1176] in [-2, 2) and grid_thw INT64 [len, 3]."""
    generator = torch.Generator().manual_seed(seed)
    patches = sum(t * h * w for t, h, w in grids)
    pixels = torch.rand(patches, PATCH_FEATURES, generator=generator) * 4 - 2
    return pixels, torch.tensor(grids, dtype=torch.int64)
