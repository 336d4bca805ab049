"""The qwen2-vl language engine's in-place KV cache on the GPU, checked before anything is
served: a language graph of Qwen2-VL-2B's shape cut to ``--layers`` layers (random weights,
written by the exporter) runs on ONNX Runtime's CUDA provider through mmaas's bound engine
(the runtime's own code path: cache rows bound as past and present) and is compared with
the same graph in FP32 on the CPU provider in each mode of :mod:`mmaas.core.decoder`:

* new prompts batched, right-padded (rows of 29, 17 and 1 tokens),
* a prompt continued after a past (batch 1), and
* decode with each row at its own length, a free row inside the batch;

then the decode step is captured as CUDA graphs (batch 1, 2, 4 and 16 in one graph session)
and replayed against plain runs, and the node placement is read (nodes on the CPU provider,
Memcpy nodes). Prints a table, writes ``--out`` (JSON). Exit 1 when a check fails.

Usage (on the GPU host, onnxruntime-gpu importable):
    python scripts/gpu_qwen_vl_checks.py --out OUT.json [--layers 2] [--precisions bf16 fp16]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import torch

from mmaas.backends.onnxruntime.runtime.binding import OrtBoundEngine
from mmaas.backends.onnxruntime.runtime.placement import capture_fd2, parse_placement
from mmaas.core import decoder
from mmaas.pipelines.qwen2_vl.config import LanguageDims
from mmaas.pipelines.qwen2_vl.convert.checkpoint import REAL_REGULAR, _config
from mmaas.pipelines.qwen2_vl.export.language import export_language
from mmaas.pipelines.qwen2_vl.runtime.language import LanguageRuns

CAPACITY = 1024
CUDA = "CUDAExecutionProvider"


def model_of(layers: int) -> Any:
    """Qwen2-VL-2B's configuration cut to ``layers`` text layers and one vision block, with
    random weights (std 0.02, made on the GPU when there is one)."""
    from transformers import Qwen2VLForConditionalGeneration

    config = _config(
        {"vocab_size": 151936, "hidden_size": 1536, "intermediate_size": 8960,
         "num_hidden_layers": layers, "num_attention_heads": 12, "num_key_value_heads": 2,
         "tie_word_embeddings": True},
        {"depth": 1, "embed_dim": 1280, "num_heads": 16, "hidden_size": 1536},
        [16, 24, 24], REAL_REGULAR,
    )  # fmt: skip
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        torch.manual_seed(0)
        return Qwen2VLForConditionalGeneration(config).float().eval()


def session(path: Path, device: str, graphs: bool = False, verbose: bool = False) -> Any:
    """An ONNX Runtime session on ``device`` (cpu or cuda), with CUDA graphs if asked."""
    options = ort.SessionOptions()
    if verbose:
        options.log_severity_level = 0
    if device == "cpu":
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    cuda = {"device_id": "0", "use_tf32": "0"}
    if graphs:
        cuda["enable_cuda_graph"] = "1"
    return ort.InferenceSession(
        str(path), options, providers=[(CUDA, cuda), "CPUExecutionProvider"]
    )


def runs_of(path: Path, device: str, dims: LanguageDims, cache_type: str) -> LanguageRuns:
    """The runtime's LanguageRuns over a session of ``path`` (16 cache rows), its decode
    batches 1, 2, 4 and 16 captured (CUDA graphs on cuda, in one graph session)."""
    plain = session(path, device)
    graphs = (lambda: session(path, device, graphs=True)) if device == "cuda" else None
    runs = LanguageRuns(OrtBoundEngine(plain, device, graphs), dims, CAPACITY, 16, cache_type)
    runs.capture([1, 2, 4, 16])
    return runs


def scenario(runs: LanguageRuns, hidden: int) -> dict[str, np.ndarray]:
    """The three modes on a fresh cache: logits of each run, by name."""
    g = np.random.default_rng(1)
    lengths = [29, 17, 1]
    embeds = (g.standard_normal((3, 29, hidden)) * 0.1).astype(np.float32)
    positions = (
        np.broadcast_to(np.arange(29), (3, 3, 29)).astype(np.int64) + np.arange(3)[:, None, None]
    )
    out: dict[str, np.ndarray] = {}
    for row, n in enumerate(lengths):
        embeds[row, n:] = 0
    out["new prompts (29, 17, 1), slots 1-3"] = runs.prefill(1, embeds, positions, lengths).logits()
    more = (g.standard_normal((1, 11, hidden)) * 0.1).astype(np.float32)
    at = np.arange(29, 40)[None, None, :].repeat(3, 0).astype(np.int64)
    out["continued prompt, slot 1 past 29"] = runs.prefill(1, more, at, [11], past=29).logits()
    step = (g.standard_normal((4, 1, hidden)) * 0.1).astype(np.float32)
    seqlens = np.array([0, 40, 17, 1], np.int32)  # slot 0 free
    pos = np.broadcast_to(seqlens.astype(np.int64)[None, :, None], (3, 4, 1)).copy()
    out["decode, slots 0-3 (0 free)"] = runs.decode(step, pos, seqlens).logits()[1:]
    return out


def compare(got: np.ndarray, want: np.ndarray) -> dict[str, float]:
    """Relative max difference, cosine, and whether the argmax rows agree."""
    scale = float(np.abs(want).max()) or 1.0
    cosine = float((got * want).sum() / (np.linalg.norm(got) * np.linalg.norm(want)))
    return {"rel_max_diff": float(np.abs(got - want).max()) / scale, "cosine": cosine,
            "argmax_equal": float((got.argmax(-1) == want.argmax(-1)).mean()),
            "finite": bool(np.isfinite(got).all())}  # fmt: skip


def placement(path: Path) -> dict[str, Any]:
    """Where the CUDA session placed the nodes (CPU nodes, Memcpy count)."""
    with capture_fd2() as captured:
        session(path, "cuda", verbose=True)
    found = parse_placement(captured.text)
    return {"nodes": found.nodes, "cpu_nodes": found.cpu_nodes, "memcpy": found.memcpy,
            "errors": found.errors}  # fmt: skip


def graph_check(runs: LanguageRuns, hidden: int) -> dict[str, Any]:
    """Replay each captured decode batch against a plain bound run of the same step; time
    the replays."""
    report: dict[str, Any] = {}
    g = np.random.default_rng(2)
    for batch in (1, 2, 4, 16):
        step = (g.standard_normal((batch, 1, hidden)) * 0.1).astype(np.float32)
        seqlens = np.arange(batch, dtype=np.int32) * 3 + 5
        pos = np.broadcast_to(seqlens.astype(np.int64)[None, :, None], (3, batch, 1)).copy()
        replayed = runs.decode(step, pos, seqlens).logits()
        pasts, presents = runs.views(0, batch)
        feeds = {decoder.EMBEDS: step, decoder.POSITIONS: pos, decoder.SEQLENS: seqlens,
                 decoder.LOGITS_INDEX: np.zeros(batch, np.int64), **pasts}  # fmt: skip
        plain = runs.bound.run(feeds, {decoder.LOGITS: None, **presents})[decoder.LOGITS].read()
        times = []
        for _ in range(50):
            t0 = time.perf_counter()
            runs.graphs[batch].graph.replay()
            times.append(time.perf_counter() - t0)
        report[f"batch {batch}"] = {**compare(replayed, plain),
                                    "replay_ms_median": 1000 * float(np.median(times))}  # fmt: skip
    return report


def main() -> int:
    """Run every check (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--precisions", nargs="+", default=["bf16", "fp16"])
    parser.add_argument("--device", default="cuda", help="cuda, or cpu for a dry run (fp16)")
    args = parser.parse_args()
    print("onnxruntime", ort.__version__, ort.get_available_providers(), flush=True)
    model = model_of(args.layers)
    text = model.model.language_model.config
    dims = LanguageDims(args.layers, 2, 128, 1536, text.vocab_size)
    report: dict[str, Any] = {"layers": args.layers, "capacity": CAPACITY}
    ok = True
    with tempfile.TemporaryDirectory() as temp:
        reference_path = Path(temp) / "fp32.onnx"
        export_language(model, reference_path, "fp32", CAPACITY)
        reference = scenario(runs_of(reference_path, "cpu", dims, "FP32"), 1536)
        for precision in args.precisions:
            path = Path(temp) / f"{precision}.onnx"
            export_language(model, path, precision, CAPACITY)
            cache = {"bf16": "BF16", "fp16": "FP16"}[precision]
            entry: dict[str, Any] = {"placement": placement(path) if args.device == "cuda" else {}}
            try:
                started = time.perf_counter()
                runs = runs_of(path, args.device, dims, cache)
                entry["load_and_capture_s"] = time.perf_counter() - started
                got = scenario(runs, 1536)
                entry["modes"] = {k: compare(got[k], reference[k]) for k in reference}
                entry["graphs"] = graph_check(runs, 1536)
            except Exception as exc:  # report what broke, go on with the next precision
                entry["error"] = f"{type(exc).__name__}: {exc}"
            modes = entry.get("modes", {})
            entry["ok"] = "error" not in entry and all(
                m["cosine"] > 0.99 and m["finite"] for m in modes.values()
            )
            ok &= entry["ok"]
            report[precision] = entry
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    for precision in args.precisions:
        entry = report[precision]
        where = entry["placement"]
        print(f"{precision}: ok={entry['ok']} cpu nodes={where.get('cpu_nodes', [])[:6]} "
              f"memcpy={where.get('memcpy')} {entry.get('error', '')}")  # fmt: skip
        for name, m in {
            **entry.get("modes", {}),
            **{k: v for k, v in entry.get("graphs", {}).items() if isinstance(v, dict)},
        }.items():
            print(
                f"  {name:38s} rel {m['rel_max_diff']:.2e} cos {m['cosine']:.6f} "
                f"argmax {m['argmax_equal']:.2f} {m.get('replay_ms_median', '')}"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
