"""Qwen2-VL-2B's engines timed on the GPU without a conversion or a server: random weights of
the published 2B configuration (made on the GPU), the engines written by mmaas's exporter
(language in bf16, vision in fp16) and run by mmaas's runtime code (the bound engine, the
KV cache in place, decode steps as CUDA graphs; the vision engine through the back end's
CUDA graph at its patch bucket), next to transformers ``generate`` (bf16, sdpa) on the same
weights and GPU. The engine floor of what the served benchmark measures
(benchmarks/bench_qwen_vl_gpu.py), for a lease too short for the 2B conversion and a server.

Figures (medians): decode step per batch (1, 16, 64) as replayed graphs, with the step's
host copies; prefill of a 296-token prompt (one 448x448 picture and a 20-token question) at
batch 1; the vision engine at 1,024 patches; transformers' c=1 TTFT and TPOT and c=16
tok/s. Writes ``--out`` (JSON) and prints a table.

Usage: python scripts/gpu_qwen_vl_raw.py --out OUT.json [--skip-vision] [--skip-transformers]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import torch

from mmaas.backends.onnxruntime.runtime.binding import OrtBoundEngine
from mmaas.pipelines.qwen2_vl.config import LanguageDims
from mmaas.pipelines.qwen2_vl.convert.checkpoint import config_2b
from mmaas.pipelines.qwen2_vl.export.language import export_language
from mmaas.pipelines.qwen2_vl.runtime.language import LanguageRuns

CUDA = "CUDAExecutionProvider"
CAPACITY, PROMPT = 4096, 296
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: a dry run of the script


def session(path: Path, graphs: bool = False) -> ort.InferenceSession:
    """A CUDA session (CUDA graphs when asked)."""
    cuda = {"device_id": "0", **({"enable_cuda_graph": "1"} if graphs else {})}
    return ort.InferenceSession(str(path), providers=[(CUDA, cuda), "CPUExecutionProvider"])


def median_ms(run: Any, repeat: int = 30, warm: int = 3) -> float:
    """Median wall time of ``run()`` in ms (it synchronises: ONNX Runtime's runs do)."""
    for _ in range(warm):
        run()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times)


def language(model: Any, folder: Path) -> dict[str, Any]:
    """Decode steps per batch and a 296-token prefill through the runtime's LanguageRuns."""
    path = folder / "language.onnx"
    started = time.perf_counter()
    export_language(model, path, "bf16", CAPACITY)
    text = model.model.language_model.config
    dims = LanguageDims(text.num_hidden_layers, 2, 128, 1536, text.vocab_size)
    bound = OrtBoundEngine(session(path), "cuda", lambda: session(path, graphs=True))
    runs = LanguageRuns(bound, dims, CAPACITY, 64, "BF16")
    runs.capture([1, 16, 64])
    figures: dict[str, Any] = {"export_and_load_s": time.perf_counter() - started}
    g = np.random.default_rng(0)
    prompt = (g.standard_normal((1, PROMPT, 1536)) * 0.02).astype(np.float32)
    positions = np.broadcast_to(np.arange(PROMPT), (3, 1, PROMPT)).astype(np.int64)
    figures["prefill_ms_296"] = median_ms(
        lambda: runs.prefill(0, prompt, positions, [PROMPT]).top_ids, repeat=10
    )
    for batch in (1, 16, 64):
        embeds = (g.standard_normal((batch, 1, 1536)) * 0.02).astype(np.float32)
        seqlens = np.full(batch, PROMPT, np.int32)
        at = np.broadcast_to(seqlens.astype(np.int64)[None, :, None], (3, batch, 1)).copy()
        figures[f"decode_step_ms_b{batch}"] = median_ms(
            lambda e=embeds, a=at, s=seqlens: runs.decode(e, a, s).top_ids
        )
        figures[f"decode_tok_s_b{batch}"] = batch * 1000 / figures[f"decode_step_ms_b{batch}"]
    return figures


def vision(model: Any, folder: Path) -> dict[str, Any]:
    """The vision engine (fp16 export) at 1,024 patches, padded to its 1,036 bucket and
    replayed as a CUDA graph by the back end's GPU instance."""
    from mmaas.backends.onnxruntime.runtime.gpu import load_gpu
    from mmaas.backends.onnxruntime.runtime.settings import GpuSettings
    from mmaas.core.manifest import ModelInfo, TensorInfo
    from mmaas.pipelines.qwen2_vl.export.vision import export_vision
    from mmaas.pipelines.qwen2_vl.runtime.embeddings import ImageEmbeddings

    path = folder / "vision.onnx"
    started = time.perf_counter()
    export_vision(model.model.visual.cpu(), path, half=True)
    shapes = {"pixel_values": (1036, 1176), "grid_thw": (4, 3)}
    info = ModelInfo("vision", "1", "onnxruntime", "fp16", 0, (
        TensorInfo("pixel_values", "FP32", (-1, 1176), (4, 1176), (1024, 1176), (4108, 1176)),
        TensorInfo("grid_thw", "INT64", (-1, 3), (1, 3), (1, 3), (4, 3))),
        (TensorInfo("image_embeds", "FP32", (-1, 1536)),))  # fmt: skip
    gpu = GpuSettings("cuda", True, (shapes,), "heuristic", False)
    engine = load_gpu(path, info, gpu, graphs=True, cache_dir=folder)
    figures: dict[str, Any] = {"export_and_load_s": time.perf_counter() - started,
                               "cuda_graphs": engine.facts.get("cuda_graphs")}  # fmt: skip
    runs = ImageEmbeddings(engine, 2, 4, [1036], 0)
    pixels = np.random.default_rng(1).standard_normal((1024, 1176)).astype(np.float32)
    figures["vision_ms_1024"] = median_ms(lambda: runs.run(pixels, [(1, 32, 32)]), repeat=20)
    return figures


@torch.no_grad()
def transformers_side(model: Any) -> dict[str, Any]:
    """transformers generate in bf16 with sdpa on the same weights: a 296-token prompt."""
    model = model.to(torch.bfloat16).to(DEVICE).eval()
    model.config._attn_implementation = "sdpa"
    image = model.config.image_token_id
    ids = torch.full((1, PROMPT), 100, dtype=torch.long, device=DEVICE)
    ids[0, 10 : 10 + 256] = image
    grid = torch.tensor([[1, 32, 32]], device=DEVICE)
    pixels = torch.randn(1024, 1176, device=DEVICE, dtype=torch.bfloat16)
    kwargs = {"input_ids": ids, "pixel_values": pixels, "image_grid_thw": grid,
              "mm_token_type_ids": (ids == image).int(), "do_sample": False}  # fmt: skip

    def timed(new: int, batch: int = 1) -> float:
        more = {k: (v.repeat(batch, 1) if k in ("input_ids", "mm_token_type_ids") else
                    v.repeat(batch, 1) if k in ("pixel_values", "image_grid_thw") else v)
                for k, v in kwargs.items()}  # fmt: skip
        sync = torch.cuda.synchronize if DEVICE == "cuda" else (lambda: None)
        sync()
        started = time.perf_counter()
        model.generate(**more, max_new_tokens=new, min_new_tokens=new)
        sync()
        return time.perf_counter() - started

    timed(2)
    first = statistics.median(timed(1) for _ in range(3))
    whole = statistics.median(timed(128) for _ in range(2))
    return {"ttft_ms_c1": first * 1000, "tpot_ms_c1": (whole - first) / 127 * 1000,
            "tok_s_c16": 16 * 128 / timed(128, 16)}  # fmt: skip


def main() -> int:
    """Build, time, print, write (module docstring)."""
    from transformers import Qwen2VLForConditionalGeneration

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--skip-vision", action="store_true")
    parser.add_argument("--skip-transformers", action="store_true")
    args = parser.parse_args()
    with torch.device(DEVICE):
        torch.manual_seed(0)
        model = Qwen2VLForConditionalGeneration(config_2b()).float().eval()
    gpu = torch.cuda.get_device_name() if DEVICE == "cuda" else "none"
    report: dict[str, Any] = {"gpu": gpu, "onnxruntime": ort.__version__}
    parts = [("language", language), ("vision", vision), ("transformers", None)]
    with tempfile.TemporaryDirectory() as temp:
        for name, part in parts:
            if (name == "vision" and args.skip_vision) or (
                name == "transformers" and args.skip_transformers
            ):
                continue
            started = time.perf_counter()
            try:
                report[name] = part(model, Path(temp)) if part else transformers_side(model)
            except Exception as exc:  # one part failing leaves the others' figures
                report[name] = {"error": f"{type(exc).__name__}: {exc}"}
            report[name]["part_s"] = time.perf_counter() - started
            args.out.write_text(json.dumps(report, indent=2) + "\n")
            print(name, json.dumps(report[name]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
