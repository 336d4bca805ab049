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
[--depth N --embed-dim N --num-heads N --hidden-size N] [--broken-trace]``.
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
from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VisionTransformerPretrainedModel

from qwen_vl_encoder import (
    ExportError,
    PlainEncoder,
    TraceableVisionEncoder,
    load_checkpoint,
    random_model,
    sample_inputs,
    small_config,
)

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = ROOT / "models" / "qwen-vl" / "qwen2_vl_vision.onnx"
OPSET = 18  # LayerNormalization (17) and ReduceMean-18; parsed by TensorRT 10 and ORT
TRACED_GRID = (1, 16, 16)  # 224x224 pixels: the profile's min, and the broken trace's size
VALIDATION_GRIDS = (((1, 16, 16),), ((1, 8, 12),), ((1, 32, 32),), ((1, 12, 8), (1, 4, 6)))
INPUT_NAMES = ["pixel_values", "grid_thw"]
OUTPUT_NAMES = ["image_embeds"]
# FP32 with different summation orders (ONNX Runtime's fused kernels vs PyTorch) differs by
# a few ulps per op; measured ~2e-6 of the largest value for the small model.
RELATIVE_TOLERANCE = 1e-5
PROTOBUF_LIMIT = (2 << 30) - (64 << 20)  # bytes of weights past which .onnx cannot hold them


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
                small_config(args.depth, args.embed_dim, args.num_heads, args.hidden_size),
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
