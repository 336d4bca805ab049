"""The qwen2-vl convert part (``mmaas convert qwen2-vl OUT_DIR``): a Qwen2-VL checkpoint -> a
model directory the qwen2-vl pipeline builds from, from a random seeded checkpoint of a
published configuration (``--config small``, the default, or ``2b``) or a real one
(``--checkpoint DIR``), for the CPU (FP32) or a GPU (``--device gpu --precision bf16|fp16``).

Writes into ``OUT_DIR``, each file atomically:

    checkpoint/               the Hugging Face checkpoint converted from (config, safetensors,
                              tokenizer, chat template, preprocessor config): transformers'
                              AutoTokenizer, Qwen2VLImageProcessorPil and
                              Qwen2VLForConditionalGeneration load it
    qwen2_vl_vision.onnx      the vision encoder (pixel_values, grid_thw -> image_embeds),
                              CUDA-graph capturable (no shape arithmetic on grid_thw)
    qwen2_vl_language.onnx    the Qwen2 decoder over an in-place KV cache (GroupQueryAttention),
                              in the target precision, its cache ``context`` tokens a row
    embed_tokens.npy          FP32 [vocab, hidden], the text-token embedding table
    language_gate.npz         the FP32 reference generation of the build's generation gate
    tokenizer.json            the checkpoint's tokenizer, for the ``tokenizers`` library
    runtime.json              :class:`mmaas.pipelines.qwen2_vl.config.RuntimeConfig`
    model.yaml                the spec for these engines and the served profile

Each graph is checked against transformers (:mod:`..export.validate`): the tokenizer's ids,
the vision graph over its profile, the language graph at prefill, decode, padded and
chunked points; ``full_validation`` adds the profile's largest points (slow on 2 cores).

The conversion is current when runtime.json carries the digest of this package's code
(:func:`code_digest`) and every file is there; ``if_stale`` then does nothing (set-up runs
so). Past the small checkpoint each part runs in its own process (a 2B conversion holds the
FP32 model, 9 GB, per part, and the vision export needs about 20 GB more): it runs on a host
with 32 GB or more (the GPU host, 128 GB; a 24 GB development machine does not hold it).
torch and transformers are imported only to convert.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Literal

from mmaas.core.errors import IntegrityError, MmaasError, UsageError
from mmaas.core.files import atomic_write_text
from mmaas.pipelines.qwen2_vl.config import RuntimeConfig
from mmaas.pipelines.qwen2_vl.export.spec_file import Profile

PACKAGE = Path(__file__).resolve().parent.parent  # mmaas/pipelines/qwen2_vl
CODE = ("config.py", "convert/*.py", "export/*.py")  # what the converted files depend on
FILES = ("qwen2_vl_vision.onnx", "qwen2_vl_language.onnx", "embed_tokens.npy",
         "tokenizer.json", "runtime.json", "language_gate.npz", "model.yaml")  # fmt: skip
PARTS = ("vision", "language", "side")
SEEDED = {"small": "the small random seeded checkpoint",
          "2b": "a random seeded checkpoint of Qwen2-VL-2B's configuration"}  # fmt: skip
CHILD = (
    "import pickle, sys\n"
    "from mmaas.pipelines.qwen2_vl.convert.converter import run_part\n"
    "say = lambda line: print(line, file=sys.stderr, flush=True)\n"
    "run_part(sys.argv[1], pickle.loads(sys.stdin.buffer.read()), say, child=True)\n"
)
Say = Callable[[str], None]


class ConvertError(MmaasError):
    """A file could not be read or written, or a part failed in its own process (exit 1)."""


@dataclass(frozen=True)
class ConvertOptions:
    """What to convert and how (the options of ``mmaas convert qwen2-vl``).

    Attributes:
        out_dir: the model directory to write.
        checkpoint: a real Qwen2-VL checkpoint folder; None: a seeded one of ``config``.
        config: the seeded checkpoint's published configuration (``small``, ``2b``).
        device, precision: where the engines run (cpu: fp32; gpu: fp16 or bf16).
        seed, init_std: the seeded checkpoint's weights (None: checkpoint.SEED, the
            configuration's std).
        profile: the served limits the engines and model.yaml are made for.
        validation: "skip", "default" or "full" (adds the profile's largest points).
        if_stale: do nothing when ``out_dir`` holds a current conversion.
        broken_trace: write only the known-bad plain trace of the vision encoder there.
    """

    out_dir: Path
    checkpoint: Path | None = None
    config: str = "small"
    device: str = "cpu"
    precision: str = "fp32"
    seed: int | None = None
    init_std: float | None = None
    profile: Profile = field(default_factory=Profile)
    validation: Literal["skip", "default", "full"] = "default"
    if_stale: bool = False
    broken_trace: Path | None = None


@dataclass(frozen=True)
class ConvertResult:
    """``out_dir`` and whether it was already current (nothing written), or how long the
    conversion took (seconds)."""

    out_dir: Path
    up_to_date: bool
    seconds: float = 0.0


class Qwen2VLConverter:
    """The qwen2-vl kind's convert part (``PIPELINES["qwen2-vl"].convert``)."""

    def convert(self, options: ConvertOptions, say: Say) -> ConvertResult:
        """Convert (see the module docstring); ``say`` gets one progress line at a time.

        Raises:
            CheckpointError: the checkpoint folder is unusable.
            ValidationError: a graph or the tokenizer differs from transformers.
            SideFileError, IntegrityError: the chat template or runtime.json cannot be made.
            ConvertError: a file cannot be read or written; a part's process failed.
            UsageError: torch or transformers is missing (the ``convert`` extra).
        """
        if options.if_stale and is_current(options.out_dir):
            return ConvertResult(options.out_dir, up_to_date=True)
        started = time.perf_counter()
        checkpoints = _checkpoint_module()
        target = options.out_dir / "checkpoint"
        try:
            if options.checkpoint:
                checkpoints.copy_real(options.checkpoint, target)
            else:
                seed = checkpoints.SEED if options.seed is None else options.seed
                checkpoints.write_seeded(target, options.config, seed, options.init_std)
            say(f"checkpoint {target} in {time.perf_counter() - started:.1f} s")
            if options.broken_trace:
                from mmaas.pipelines.qwen2_vl.export.vision import export_broken_trace

                export_broken_trace(
                    checkpoints.load_model(target).model.visual, options.broken_trace
                )
            elif options.checkpoint or options.config != "small":  # RAM: module doc
                _in_children(options)
            else:
                for part in PARTS:
                    run_part(part, options, say)
        except OSError as exc:
            raise ConvertError(f"{exc}; check the folders' permissions and free space") from exc
        return ConvertResult(options.out_dir, False, time.perf_counter() - started)


def run_part(part: str, options: ConvertOptions, say: Say, child: bool = False) -> None:
    """Convert one part (vision graph, language graph, or side files and model.yaml) from
    ``out_dir/checkpoint`` and validate it. In a ``child`` process an expected error is its
    message on stdout (the parent reports it) and exit 1."""
    try:
        _run_part(part, options, say)
    except (MmaasError, OSError) as exc:
        if not child:
            raise
        print(exc)
        sys.exit(1)


def _run_part(part: str, options: ConvertOptions, say: Say) -> None:
    from mmaas.pipelines.qwen2_vl.convert import checkpoint, tokenizer
    from mmaas.pipelines.qwen2_vl.export import (
        gate,
        language,
        side_files,
        spec_file,
        validate,
        vision,
    )

    started, out, profile = time.perf_counter(), options.out_dir, options.profile
    source = out / "checkpoint"
    model = checkpoint.load_model(source)
    lines: list[str] = []
    if part == "side":
        config = side_files.write_side_files(source, out, model, profile, code_digest())
        say(f"wrote embed_tokens.npy, tokenizer.json, runtime.json: {config.prompt}")
        sizes = language.dims(model.model.language_model.config)
        what = str(options.checkpoint) if options.checkpoint else SEEDED[options.config]
        target = spec_file.Target(options.device, options.precision)
        atomic_write_text(out / "model.yaml", spec_file.render(*sizes, profile, what, target))
        say(f"wrote {out / 'model.yaml'}")
        say(gate.write_gate_samples(source, out / "language_gate.npz"))
        if options.validation != "skip":
            samples = tokenizer.training_files()[-3:]
            lines = [validate.validate_tokenizer(source, samples)]
    else:
        path = out / f"qwen2_vl_{part}.onnx"
        if part == "vision":
            vision.export_vision(model.model.visual, path, half=options.device == "gpu")
            grids = validate.vision_grid_sets(profile.max_patches, profile.max_images)
        else:
            language.export_language(model, path, options.precision, profile.context)
            points = validate.language_points(profile.prefill_chunk, profile.decode_batch)
        say(f"exported {path.name} ({path.stat().st_size / 1e6:.1f} MB)")
        if options.validation != "skip" and (part == "language" or options.device == "cpu"):
            full = options.validation == "full"
            lines = (
                validate.validate_vision(path, model.model.visual, grids if full else grids[:-1])
                if part == "vision"
                else validate.validate_language(
                    model, profile.context, points if full else points[:-1]
                )
            )
    for line in lines:
        say(f"  {line}")
    say(f"{part}: {time.perf_counter() - started:.1f} s")


def code_digest() -> str:
    """sha256 over the converter's code (:data:`CODE`, by path and bytes): a conversion made
    by other code is stale."""
    digest = hashlib.sha256()
    for path in sorted(p for pattern in CODE for p in PACKAGE.glob(pattern)):
        digest.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def is_current(out_dir: Path) -> bool:
    """True when ``out_dir`` holds every file of a conversion made by this code."""
    try:
        stamp = RuntimeConfig.read(out_dir / "runtime.json").exporter
    except IntegrityError:
        return False
    return stamp == code_digest() and all((out_dir / name).is_file() for name in FILES)


def _checkpoint_module() -> ModuleType:
    """The checkpoint module (torch and transformers load now).

    Raises:
        UsageError: they are not installed.
    """
    try:
        from mmaas.pipelines.qwen2_vl.convert import checkpoint
    except ImportError as exc:
        raise UsageError(
            f"mmaas convert needs torch and transformers ({exc}); install the convert "
            "extra: pip install 'mmaas[convert]'"
        ) from exc
    return checkpoint


def _in_children(options: ConvertOptions) -> None:
    """Run each part in a child Python process of its own (progress on stderr, as it
    comes): the two graphs at the same time, then the side files.

    Raises:
        ConvertError: a child failed: its error's message, or (a crash) its exit code.
    """
    root = str(PACKAGE.parents[2])  # the folder holding the mmaas package
    path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    failures = []
    # the side files hash the two graphs (runtime.json): they are written once both exist
    for wave in ([p for p in PARTS if p != "side"], ["side"]):
        children = {}
        for part in wave:
            child = subprocess.Popen([sys.executable, "-c", CHILD, part], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
            assert child.stdin is not None
            child.stdin.write(pickle.dumps(options))
            child.stdin.close()
            children[part] = child
        for part, child in children.items():
            error = (child.stdout.read() if child.stdout else b"").decode(errors="replace").strip()
            if child.wait():
                failures.append(error or f"converting the {part} part failed in its own process "
                                f"(exit {child.returncode}); its output is above")  # fmt: skip
        if failures:
            break
    if failures:
        raise ConvertError("; ".join(failures))
