"""GPU variants of the example models, for the H200 run, its tests and the GPU image test.

``write_gpu_model(source_folder, out_folder, ...)`` copies a model folder's model.yaml with
a ``build.onnxruntime`` block for ``device: gpu`` (CUDA provider, optional CUDA graphs)
and, for a batching model, dynamic batching; the ONNX file is copied beside it. The
models under ``models/`` stay CPU models.

    python scripts/gpu_models.py OUT_DIR [--precision fp16] [--no-graphs]

writes ``OUT_DIR/ppocr-det`` (max_batch_size 8, graphs at batch 1, 4 and 8 of 640x640) and
``OUT_DIR/qwen-vl`` (graph at the opt shape).
"""

from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
# The fp16 accuracy gate (engine vs ONNX Runtime CPU on the fp32 graph). On the H200 the
# converted PP-OCRv4 det was off by 0.136 at most on a text page (mean 1.4e-4) and qwen-vl by
# 0.215 on values up to 73 (relative L2 1.8e-3): a max-abs bound alone is set by a few edge
# pixels, so the cosine of the whole output carries the gate.
# The gate runs on a real input (a rendered text page; qwen-vl: 1024 normal patches of one
# 32x32 image): on random data PP-OCR's output is ~1e-5 everywhere and its cosine is noise.
FP16_GATE = "{accuracy: {atol: 0.5, min_cosine: 0.9995, samples: [gate-sample.npz]}}"


def write_gpu_model(
    source: Path,
    out: Path,
    *,
    precision: str = "fp32",
    graphs: bool = True,
    max_batch: int | None = None,
    preferred: tuple[int, ...] = (),
    extra_build: str = "",
    checks: str = "",
    onnx: Path | None = None,
) -> Path:
    """Write ``out/model.yaml`` (the GPU variant of ``source/model.yaml``; of its vision
    engine for a multi-engine one: :func:`single_engine`) and copy the ONNX file (``onnx``
    or the source's) beside it; returns ``out``. ``max_batch`` raises
    ``max_batch_size`` and axis 0 of every profile max; ``preferred`` turns dynamic batching
    on with those preferred batch sizes; ``checks`` is a flow-style ``checks:`` value."""
    text = single_engine((source / "model.yaml").read_text())
    onnx_name = re.search(r"^\s*path:\s*(\S+)", text, re.MULTILINE)
    assert onnx_name, f"{source}/model.yaml has no source.path"
    text = re.sub(r"^target_precision: \w+", f"target_precision: {precision}", text, flags=re.M)
    if max_batch is not None:
        old = int(re.search(r"^max_batch_size: (\d+)", text, re.MULTILINE).group(1))  # type: ignore[union-attr]
        text = re.sub(r"^max_batch_size: \d+", f"max_batch_size: {max_batch}", text, flags=re.M)
        text = re.sub(rf"max: \[{old}, ", f"max: [{max_batch}, ", text)
    block = f"  onnxruntime: {{device: gpu, cuda_graphs: {str(graphs).lower()}{extra_build}}}\n"
    text += f"build:\n{block}"
    if checks:
        text += f"checks: {checks}\n"
    if preferred:
        sizes = ", ".join(map(str, preferred))
        text += (
            f"runtime:\n  dynamic_batching: {{preferred_batch_size: [{sizes}], "
            "max_queue_delay_microseconds: 100}\n"
        )
    out.mkdir(parents=True, exist_ok=True)
    (out / "model.yaml").write_text(text)
    if checks:
        np.savez(out / "gate-sample.npz", **gate_sample(source.name))
    target = out / onnx_name.group(1)  # a copy: a build context takes no symlink out of it
    target.unlink(missing_ok=True)
    shutil.copyfile(onnx or source / onnx_name.group(1), target)
    return out


def single_engine(text: str, engine: str = "vision") -> str:
    """``text`` itself for a single-engine model.yaml; for a multi-engine one (qwen-vl: the
    ``vision`` and ``language`` engines and the qwen2-vl pipeline), a single-engine
    model.yaml of its engine ``engine`` alone, under the model's name (fp32, no batch axis
    unless the engine says otherwise)."""
    spec = yaml.safe_load(text)
    if "engines" not in spec:
        return text
    one = {"name": spec["name"], "version": spec["version"], "target_precision": "fp32",
           "max_batch_size": 0, **spec["engines"][engine]}  # fmt: skip
    return yaml.safe_dump(one, sort_keys=False)


def gate_sample(model: str) -> dict[str, np.ndarray]:
    """The accuracy gate's sample of ``model`` (``ppocr-det`` or ``qwen-vl``)."""
    if model == "ppocr-det":
        import sys

        sys.path.insert(0, str(ROOT))
        from scripts.gpu_serve_check import det_page

        return {"x": det_page(1)}
    rng = np.random.default_rng(5)
    return {
        "pixel_values": rng.standard_normal((1024, 1176), dtype=np.float32),
        "grid_thw": np.array([[1, 32, 32]], np.int64),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--no-graphs", action="store_true")
    parser.add_argument("--qwen-onnx", type=Path, help="the qwen-vl vision export to use")
    args = parser.parse_args()
    graphs = not args.no_graphs
    gate = FP16_GATE if args.precision == "fp16" else ""
    write_gpu_model(
        ROOT / "models/ppocr-det",
        args.out / "ppocr-det",
        precision=args.precision,
        graphs=graphs,
        max_batch=8,
        preferred=(4, 8),
        checks=gate,
    )
    write_gpu_model(
        ROOT / "models/qwen-vl",
        args.out / "qwen-vl",
        precision=args.precision,
        graphs=graphs,
        onnx=args.qwen_onnx,
        checks=gate,
    )
    print(f"wrote {args.out}/ppocr-det and {args.out}/qwen-vl")


if __name__ == "__main__":
    main()
