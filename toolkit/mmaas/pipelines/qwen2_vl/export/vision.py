"""The vision graph: Qwen2-VL's vision encoder (patch embedding, vision blocks, patch merger)
in tensor ops that export with ``grid_thw`` as a real input.

    pixel_values FP32 [num_patches, 1176]   (1176 = 3 channels x 2 frames x 14 x 14)
    grid_thw     INT64 [num_images, 3]      (t, h, w in patches per image, as the processor gives)
    image_embeds FP32 [num_patches / 4, hidden_size]

transformers computes the rotary position ids and the per-frame attention segments from
``grid_thw.tolist()`` and splits attention by Python lengths: a trace bakes them in (the
``--broken-trace`` export, which runs only at its traced size and drops ``grid_thw``) and
``torch.export`` refuses them. :class:`VisionEncoder` computes the same positions and a
block-diagonal attention mask from ``grid_thw`` with tensor ops, so the dynamo exporter
keeps ``num_patches`` and ``num_images`` symbolic and the graph holds for every size.

CUDA-graph capture. The rule: ONNX Runtime captures a session as one CUDA graph only when
every node runs on the device, and its CUDA provider places shape arithmetic (``Shape`` and
the integer ops computing on its result) on the CPU, so a device node that reads a value
derived from a tensor's *shape* needs a Memcpy node, and the session refuses the capture.
Here the image index of each patch is clamped to ``num_images - 1``; taken from
``grid_thw.shape[0]`` that bound would be such CPU shape arithmetic feeding a device Clip.
It is computed from grid_thw's *data* instead (one per row: ``sum(grid_thw[:, 0] >= 0) -
1``), on the device, and no node reads ``Shape(grid_thw)`` (a test checks the graph).
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers.models.qwen2_vl.modeling_qwen2_vl import (
    Qwen2VisionTransformerPretrainedModel,
    Qwen2VLVisionBlock,
    apply_rotary_pos_emb_vision,
)

from mmaas.pipelines.qwen2_vl.export.onnx_io import save_program

PATCH_FEATURES = 3 * 2 * 14 * 14  # in_channels x temporal_patch_size x patch_size^2
OPSET = 18  # LayerNormalization (17) and ReduceMean-18; parsed by TensorRT 10 and ORT
TRACED_GRID = (1, 16, 16)
INPUT_NAMES = ["pixel_values", "grid_thw"]
OUTPUT_NAMES = ["image_embeds"]


def grid_layout(
    grid_thw: torch.Tensor, num_patches: int | torch.SymInt, merge: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per patch, its rotary position (row, column) and its attention segment (one per
    frame), in the processor's patch order (images, frames, merge blocks row-major, the
    ``merge x merge`` patches of a block), with tensor ops only.

    Args:
        grid_thw: INT64 [num_images, 3]. Values are clamped (t >= 1, h and w >= merge) so
            inconsistent input gives wrong numbers, never a division by zero; patches past
            the grid's total belong to the last image. (The server refuses such requests
            before they reach the engine.)
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
    patch = torch.arange(num_patches, device=grid_thw.device)  # type: ignore[arg-type]  # SymInt
    last_image = (grid_thw[:, :1] >= 0).sum() - 1  # from the data: see the module docstring
    image = torch.minimum((patch[:, None] >= ends[None, :]).sum(1), last_image)
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
    """One vision block as transformers computes it, with the per-frame attention as an
    additive mask FP32 [N, N] (0 inside a frame, the most negative float across frames)
    instead of a split by Python lengths. Attention is MatMul -> Add -> Softmax -> MatMul,
    the pattern TensorRT fuses; every row attends to at least itself (no NaN guard)."""
    attn = block.attn
    query, key, value = (
        attn.qkv(block.norm1(hidden))
        .reshape(hidden.shape[0], 3, attn.num_heads, -1)
        .permute(1, 0, 2, 3)
        .unbind(0)
    )
    query, key = apply_rotary_pos_emb_vision(query, key, cos, sin)
    query, key, value = (x.transpose(0, 1) for x in (query, key, value))  # [heads, N, dim]
    scores = torch.matmul(query * attn.scaling, key.transpose(1, 2)) + mask  # FP32 (mask)
    attended = torch.matmul(torch.softmax(scores, dim=-1).to(value.dtype), value)
    hidden = hidden + attn.proj(attended.transpose(0, 1).reshape(hidden.shape[0], -1))
    return hidden + block.mlp(block.norm2(hidden))


class VisionEncoder(torch.nn.Module):
    """The encoder's forward with the data-dependent parts in tensor ops (same weights).
    The patch embedding, a Conv3d whose kernel equals its stride and the whole patch, is
    written as the equal ``pixel_values @ weight.view(embed_dim, 1176).T``: ONNX Runtime's
    CPU Conv3d goes through im2col and was the largest single cost (-25 % at 1512 patches)."""

    def __init__(self, encoder: Qwen2VisionTransformerPretrainedModel) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
        """pixel_values FP32 [N, 1176], grid_thw INT64 [I, 3] -> FP32 [N / 4, hidden]."""
        enc = self.encoder
        positions, segments = grid_layout(grid_thw, pixel_values.shape[0], enc.spatial_merge_size)
        weight = enc.patch_embed.proj.weight  # [embed_dim, 3, 2, 14, 14], no bias
        hidden = torch.matmul(pixel_values.to(weight.dtype), weight.reshape(weight.shape[0], -1).T)
        cos, sin = enc.rotary_pos_emb(hidden, positions)
        same_frame = segments[:, None] == segments[None, :]
        mask = torch.where(same_frame, 0.0, torch.finfo(torch.float32).min)
        for block in enc.blocks:
            hidden = block_forward(block, hidden, cos, sin, mask)  # type: ignore[arg-type]
        return enc.merger(hidden).float()  # FP32 out whatever the weights' type


class PlainEncoder(torch.nn.Module):
    """transformers' own forward, returning only the merged embeddings (for the trace)."""

    def __init__(self, encoder: Qwen2VisionTransformerPretrainedModel) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
        """pixel_values FP32 [N, 1176], grid_thw INT64 [I, 3] -> FP32 [N / 4, hidden]."""
        return self.encoder(pixel_values, grid_thw).pooler_output


def sample_inputs(
    grids: tuple[tuple[int, int, int], ...], seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random pixel_values FP32 [sum t*h*w, 1176] in [-2, 2) and grid_thw INT64 [len, 3]."""
    generator = torch.Generator().manual_seed(seed)
    patches = sum(t * h * w for t, h, w in grids)
    pixels = torch.rand(patches, PATCH_FEATURES, generator=generator) * 4 - 2
    return pixels, torch.tensor(grids, dtype=torch.int64)


def export_vision(
    encoder: Qwen2VisionTransformerPretrainedModel, output: Path, half: bool = False
) -> None:
    """Export with the dynamo exporter (opset 18), ``num_patches`` and ``num_images``
    dynamic; written atomically (external data past protobuf's limit). ``half``: weights
    and activations in fp16 (a GPU engine, no conversion at build), attention scores and
    softmax in FP32, pixel_values and image_embeds FP32 as always."""
    pixels, grid = sample_inputs((TRACED_GRID,))
    program = torch.onnx.export(
        VisionEncoder(encoder.half() if half else encoder).eval(),
        (pixels, grid),
        dynamo=True,
        input_names=INPUT_NAMES,
        output_names=OUTPUT_NAMES,
        dynamic_shapes={
            "pixel_values": {0: torch.export.Dim("num_patches", min=4)},
            "grid_thw": {0: torch.export.Dim("num_images", min=1)},
        },
        opset_version=OPSET,
        verbose=False,
    )
    save_program(program, output, sum(p.numel() * p.element_size() for p in encoder.parameters()))


def export_broken_trace(encoder: Qwen2VisionTransformerPretrainedModel, output: Path) -> None:
    """The known-bad export: a plain TorchScript trace (dynamo=False) of transformers'
    forward at 16x16 patches. It declares num_patches dynamic, but the attention split
    sizes are constants and ``grid_thw`` is dropped: it fails at any other patch count."""
    pixels, grid = sample_inputs((TRACED_GRID,))
    temp = output.with_name(f".{output.name}.tmp")
    torch.onnx.export(
        PlainEncoder(encoder),
        (pixels, grid),
        str(temp),
        dynamo=False,
        input_names=INPUT_NAMES,
        output_names=OUTPUT_NAMES,
        opset_version=OPSET,
        dynamic_axes={
            "pixel_values": {0: "num_patches"},
            "grid_thw": {0: "num_images"},
            "image_embeds": {0: "num_tokens"},
        },
    )
    temp.replace(output)
