"""Export the Qwen2-VL vision encoder (patch embedding, vision blocks, patch merger) to ONNX.

The architecture is ``transformers``' ``Qwen2VisionTransformerPretrainedModel``. By default a
small randomly initialised instance (fixed seed) is exported, for tests; ``--checkpoint DIR``
exports the real weights of a local Qwen2-VL checkpoint (``config.json`` + ``*.safetensors``;
nothing is downloaded).

Signature of the export (see models/qwen-vl/README.md for why it is built this way):
    pixel_values FP32 [num_patches, 1176]   (1176 = 3 channels x 2 frames x 14 x 14)
    grid_thw     INT64 [num_images, 3]      (t, h, w in patches per image, as the processor gives)
    image_embeds FP32 [num_patches / 4, hidden_size]

transformers computes the rotary position ids and the per-image attention segments from
``grid_thw.tolist()`` and splits attention by Python lengths: a trace bakes them in (the
``--broken-trace`` export, which only runs at its traced size and drops ``grid_thw``) and
``torch.export`` refuses them. :class:`TraceableVisionEncoder` computes the same positions and
a block-diagonal attention mask from ``grid_thw`` with tensor ops, so the dynamo exporter
keeps ``num_patches`` and ``num_images`` symbolic and the graph holds for every size.

Usage: ``python scripts/export_qwen_vl.py [--checkpoint DIR] [--output PATH] [--seed N]
[--depth N --embed-dim N --num-heads N --hidden-size N --init-std X] [--broken-trace]``.
Exit 1 with one line on stderr when the checkpoint is unusable or validation fails.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch
from safetensors import safe_open
from transformers import Qwen2VLConfig, Qwen2VLVisionConfig
from transformers.models.qwen2_vl.modeling_qwen2_vl import (
    Qwen2VisionTransformerPretrainedModel,
    Qwen2VLVisionBlock,
    apply_rotary_pos_emb_vision,
)

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = ROOT / "models" / "qwen-vl" / "qwen2_vl_vision.onnx"
PATCH_FEATURES = 3 * 2 * 14 * 14  # in_channels x temporal_patch_size x patch_size^2
OPSET = 18  # LayerNormalization (17) and ReduceMean-18; parsed by TensorRT 10 and ORT
TRACED_GRID = (1, 16, 16)  # 224x224 pixels: the profile's min, and the broken trace's size
VALIDATION_GRIDS = (((1, 16, 16),), ((1, 8, 12),), ((1, 32, 32),), ((1, 12, 8), (1, 4, 6)))
INPUT_NAMES = ["pixel_values", "grid_thw"]
OUTPUT_NAMES = ["image_embeds"]
# FP32 with different summation orders (ONNX Runtime's fused kernels vs PyTorch) differs by
# a few ulps per op; measured ~2e-6 of the largest value for the small model.
RELATIVE_TOLERANCE = 1e-5
PROTOBUF_LIMIT = (2 << 30) - (64 << 20)  # bytes of weights past which .onnx cannot hold them


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
    and spatial merge (2) sizes, so the inputs are exactly the real model's. The default
    ``init_std`` 0.3 makes attention far from uniform, so a wrong position layout or mask
    shows up in validation (with transformers' 0.02 a swapped grid moves the output by only
    1e-4 of its size). Deep and wide configs want 0.02: at 0.3 they amplify FP32 rounding
    chaotically (width 1280: PyTorch FP32 vs FP64 differ by 0.3 % after 4 blocks; after 32,
    ONNX Runtime and PyTorch by 40 %)."""
    return Qwen2VLVisionConfig(
        depth=depth,
        embed_dim=embed_dim,
        num_heads=num_heads,
        hidden_size=hidden_size,
        mlp_ratio=4,
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


def export_encoder(encoder: Qwen2VisionTransformerPretrainedModel, output: Path) -> None:
    """Export with the dynamo exporter, ``num_patches`` and ``num_images`` dynamic; weights
    are stored inside the .onnx unless it would pass protobuf's 2 GiB limit (then beside it
    as ``<output>.data``, which must then travel with it). Written into a temp directory
    and renamed into place."""
    pixels, grid = sample_inputs((TRACED_GRID,))
    dynamic = {
        "pixel_values": {0: torch.export.Dim("num_patches", min=4)},
        "grid_thw": {0: torch.export.Dim("num_images", min=1)},
    }
    program = torch.onnx.export(
        TraceableVisionEncoder(encoder).eval(),
        (pixels, grid),
        dynamo=True,
        input_names=INPUT_NAMES,
        output_names=OUTPUT_NAMES,
        dynamic_shapes=dynamic,
        opset_version=OPSET,
        verbose=False,
    )
    large = sum(p.numel() for p in encoder.parameters()) * 4 >= PROTOBUF_LIMIT
    with tempfile.TemporaryDirectory(dir=output.parent, prefix=f".{output.name}.") as temp:
        program.save(str(Path(temp) / output.name), external_data=large)
        for written in sorted(Path(temp).iterdir(), key=lambda path: path.suffix == ".onnx"):
            os.replace(written, output.parent / written.name)  # the .onnx last


def export_broken_trace(encoder: Qwen2VisionTransformerPretrainedModel, output: Path) -> None:
    """The known-bad export: a plain ``torch.onnx.export`` trace (TorchScript, dynamo=False)
    of transformers' forward at 16x16 patches. It declares num_patches dynamic, but the
    attention split sizes are constants and ``grid_thw`` is dropped: it fails at any other
    number of patches (ONNX Runtime: 'Split size 256 exceeds ...')."""
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
    os.replace(temp, output)


def validate(
    onnx_path: Path,
    encoder: Qwen2VisionTransformerPretrainedModel,
    grids: tuple[tuple[tuple[int, int, int], ...], ...] = VALIDATION_GRIDS,
) -> list[dict[str, object]]:
    """Run the export in ONNX Runtime (CPU) and transformers' own forward on the same
    random inputs at each grid set; one row per set: ``{"grids", "shape", "max_abs_diff",
    "max_abs_ref"}``."""
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    rows = []
    for grid_set in grids:
        pixels, grid = sample_inputs(grid_set)
        with torch.no_grad():
            expected = encoder(pixels, grid).pooler_output.numpy()
        feeds = {"pixel_values": pixels.numpy(), "grid_thw": grid.numpy()}
        actual = session.run(None, {k: v for k, v in feeds.items() if k in names})[0]
        if actual.shape != expected.shape:
            raise ExportError(
                f"{onnx_path}: at grids {grid_set} ONNX gives {actual.shape}, "
                f"PyTorch {expected.shape}"
            )
        rows.append(
            {
                "grids": grid_set,
                "shape": list(actual.shape),
                "max_abs_diff": float(np.abs(actual - expected).max()),
                "max_abs_ref": float(np.abs(expected).max()),
            }
        )
    return rows


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line (see the module docstring); ``--tolerance`` is relative."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, help="local Qwen2-VL checkpoint folder")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--seed", type=int, default=0, help="seed of the random small model")
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--embed-dim", type=int, default=64)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--hidden-size", type=int, default=128)
    parser.add_argument(
        "--init-std",
        type=float,
        default=0.3,
        help="weight init std of the random model; 0.3 suits the small default, use 0.02 "
        "(transformers' default) for real-size random weights, which 0.3 makes chaotic",
    )
    parser.add_argument(
        "--broken-trace",
        action="store_true",
        help="write the known-bad plain trace instead (for the profile-check test)",
    )
    parser.add_argument(
        "--tolerance",
        type=float,
        default=RELATIVE_TOLERANCE,
        help="max abs diff between ONNX Runtime and PyTorch allowed, "
        "relative to the largest output value",
    )
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    """Export, then validate against PyTorch at several sizes; returns the exit code."""
    args = parse_args(argv)
    try:
        encoder = (
            load_checkpoint(args.checkpoint)
            if args.checkpoint
            else random_model(
                small_config(
                    args.depth, args.embed_dim, args.num_heads, args.hidden_size, args.init_std
                ),
                args.seed,
            )
        )
        args.output.parent.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        (export_broken_trace if args.broken_trace else export_encoder)(encoder, args.output)
        print(
            f"exported {args.output} ({args.output.stat().st_size} bytes) "
            f"in {time.perf_counter() - started:.1f} s"
        )
        if args.broken_trace:
            return 0
        for row in validate(args.output, encoder):
            print(
                f"grids {row['grids']}: output {row['shape']}, max abs diff "
                f"{row['max_abs_diff']:.3g} (max abs value {row['max_abs_ref']:.3g})"
            )
            if not row["max_abs_diff"] <= args.tolerance * row["max_abs_ref"]:
                raise ExportError(
                    f"{args.output}: differs from PyTorch by more than "
                    f"{args.tolerance} x the largest value at {row['grids']}"
                )
    except (ExportError, OSError) as exc:
        print(f"export_qwen_vl: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
