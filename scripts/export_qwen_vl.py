"""Export Qwen2-VL for the qwen2-vl pipeline: the vision and language engines' ONNX sources and
the pipeline's assets, from the small random seeded checkpoint (default) or a real one.

Writes, into ``--output`` (default ``models/qwen-vl/``, all git-ignored), each file atomically:

    checkpoint/               the Hugging Face checkpoint exported from (config, safetensors,
                              tokenizer, chat template, preprocessor config): transformers'
                              AutoTokenizer, Qwen2VLImageProcessorPil and
                              Qwen2VLForConditionalGeneration load it
    qwen2_vl_vision.onnx      the vision encoder (pixel_values, grid_thw -> image_embeds),
                              CUDA-graph capturable (no shape arithmetic on grid_thw)
    qwen2_vl_language.onnx    the Qwen2 decoder with an explicit KV cache and M-RoPE ids
    embed_tokens.npy          FP32 [vocab, hidden], the text-token embedding table
    tokenizer.json            the checkpoint's tokenizer, for the ``tokenizers`` library
    runtime.json              token ids, stop ids, image settings, the chat template split
                              into prefix/image/suffix, engine dimensions, files' sha256

Then checks the export against transformers (``scripts/qwen_vl/validate.py``): the tokenizer's
ids, the vision graph over its profile, the language graph at prefill, decode, padded and
chunked points. ``--full-validation`` adds the profile's largest points (slow on 2 cores).

Usage:
    python scripts/export_qwen_vl.py                          # small checkpoint, seed 5
    python scripts/export_qwen_vl.py --checkpoint ~/Qwen2-VL-2B-Instruct
    python scripts/export_qwen_vl.py --if-stale               # set-up: only when outdated
    python scripts/export_qwen_vl.py --broken-trace PATH      # the known-bad vision trace

With ``--checkpoint`` each graph is exported in its own process (a 2B export needs 15-23 GB
for the language graph alone). Exit 1 with one line on stderr when the checkpoint is
unusable or a check fails.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from dataclasses import fields
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `scripts.qwen_vl` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.qwen_vl.spec_file import Profile, render

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = ROOT / "models" / "qwen-vl"
PARTS = ("vision", "language", "side")


def exporter_digest() -> str:
    """sha256 over this script and its package: an export made by other code is stale."""
    digest = hashlib.sha256()
    for path in [Path(__file__), *sorted((ROOT / "scripts" / "qwen_vl").glob("*.py"))]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def is_current(output: Path) -> bool:
    """True when ``output`` holds a complete export made by this exporter's code."""
    try:
        stamp = json.loads((output / "runtime.json").read_text()).get("exporter")
    except (OSError, ValueError):
        return False
    files = ("qwen2_vl_vision.onnx", "qwen2_vl_language.onnx", "embed_tokens.npy")
    return stamp == exporter_digest() and all((output / f).is_file() for f in files)


def export_part(part: str, args: argparse.Namespace) -> None:
    """Export one part (vision graph, language graph, or side files) and validate it."""
    from scripts.qwen_vl import checkpoint as checkpoints
    from scripts.qwen_vl import language, validate, vision
    from scripts.qwen_vl.side_files import write_side_files

    started = time.perf_counter()
    model = checkpoints.load_model(args.checkpoint_dir)
    if part == "vision":
        path = args.output / "qwen2_vl_vision.onnx"
        vision.export_vision(model.model.visual, path)
        print(f"exported {path.name} ({path.stat().st_size / 1e6:.1f} MB)", flush=True)
        grid_sets = validate.vision_grid_sets(args.profile.max_patches, args.profile.max_images)
        lines = [] if args.skip_validation else validate.validate_vision(
            path, model.model.visual, grid_sets if args.full_validation else grid_sets[:-1]
        )  # fmt: skip
    elif part == "language":
        path = args.output / "qwen2_vl_language.onnx"
        language.export_language(model, path)
        print(f"exported {path.name} ({path.stat().st_size / 1e6:.1f} MB)", flush=True)
        points = validate.language_points(args.profile.context, args.profile.decode_batch)
        lines = [] if args.skip_validation else validate.validate_language(
            path, model, points if args.full_validation else points[:-1]
        )  # fmt: skip
    else:
        config = write_side_files(
            args.checkpoint_dir, args.output, model, args.profile, exporter_digest()
        )
        print(f"wrote embed_tokens.npy, tokenizer.json, runtime.json: {config['prompt']}")
        if args.spec_out:
            sizes = language.dims(model.model.language_model.config)
            what = args.checkpoint or "the small random seeded checkpoint"
            args.spec_out.write_text(render(*sizes, args.profile, str(what)))
            print(f"wrote {args.spec_out}")
        lines = [] if args.skip_validation else [validate.validate_tokenizer(args.checkpoint_dir)]
    for line in lines:
        print(f"  {line}", flush=True)
    print(f"{part}: {time.perf_counter() - started:.1f} s", flush=True)


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, help="a real Qwen2-VL checkpoint folder")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--seed", type=int, help="weights' seed (default: checkpoint.SEED)")
    parser.add_argument("--init-std", type=float, help="weights' std (checkpoint.INIT_STD)")
    parser.add_argument("--part", choices=PARTS, help="export one part only (in this process)")
    for field in fields(Profile):  # the served profile: see scripts/qwen_vl/spec_file.py
        flag = "--" + field.name.replace("_", "-")
        parser.add_argument(flag, type=int, default=field.default, help="(profile)")
    parser.add_argument("--spec-out", type=Path, help="write the export's model.yaml here")
    parser.add_argument("--skip-validation", action="store_true")
    parser.add_argument("--full-validation", action="store_true")
    parser.add_argument("--if-stale", action="store_true", help="do nothing when up to date")
    parser.add_argument("--broken-trace", type=Path, metavar="PATH")
    args = parser.parse_args(argv)
    args.checkpoint_dir = args.output / "checkpoint"
    args.profile = Profile(**{f.name: getattr(args, f.name) for f in fields(Profile)})
    return args


def main(argv: list[str]) -> int:
    """Write the checkpoint, then each part (in child processes for a real checkpoint)."""
    args = parse_args(argv)
    if args.if_stale and is_current(args.output):
        print(f"qwen-vl export up to date: {args.output}")
        return 0
    # torch and transformers load only now (the stale check above stays instant)
    from scripts.qwen_vl import checkpoint as checkpoints
    from scripts.qwen_vl import vision
    from scripts.qwen_vl.side_files import SideFileError
    from scripts.qwen_vl.validate import ValidationError

    errors = (checkpoints.CheckpointError, ValidationError, SideFileError, OSError)
    try:
        if args.part:
            export_part(args.part, args)
            return 0
        started = time.perf_counter()
        if args.checkpoint:
            checkpoints.copy_real(args.checkpoint, args.checkpoint_dir)
        else:
            seed = checkpoints.SEED if args.seed is None else args.seed
            std = checkpoints.INIT_STD if args.init_std is None else args.init_std
            checkpoints.write_small(args.checkpoint_dir, seed, std)
        print(f"checkpoint {args.checkpoint_dir} in {time.perf_counter() - started:.1f} s")
        if args.broken_trace:
            model = checkpoints.load_model(args.checkpoint_dir)
            vision.export_broken_trace(model.model.visual, args.broken_trace)
            return 0
        for part in PARTS:
            if args.checkpoint:  # own process each: RAM (see the module docstring)
                child = [sys.executable, __file__, "--part", part, *argv]
                if subprocess.run(child, check=False).returncode:
                    return 1
            else:
                export_part(part, args)
        print(f"qwen-vl export written: {args.output} in {time.perf_counter() - started:.0f} s")
    except errors as exc:
        print(f"export_qwen_vl: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
