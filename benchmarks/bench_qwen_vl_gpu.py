"""Qwen2-VL on a GPU: mmaas through its real server next to transformers ``generate`` on the
same GPU and checkpoint, in one run; one 448x448 picture and a 20-token question per
request, 128 new tokens (max_tokens; the transformers side also min_new_tokens, so EOS is
ignored there; an mmaas answer that stops at EOS counts its own tokens).

  mmaas          ``mmaas serve MODEL`` (a subprocess, the model compiled by it), driven by
                 tritonclient gRPC from this process: c=1 ModelStreamInfer, 5 requests one
                 after another (TPOT = (last - first token) / (tokens - 1), the median; TTFT
                 server-side: the server's ``mmaas_time_to_first_token_seconds`` histogram,
                 from the request's arrival, preprocessing included); c=16 and c=64 as many
                 concurrent ModelInfer requests, twice (aggregate tok/s = all tokens / wall
                 time, the better round; one response per request, so the Python gRPC front end
                 carries no per-token message); GPU memory: nvidia-smi's figure for the server
  vision         the compiled vision engine loaded by mmaas's back end in this process, a
                 1,024-patch picture through the runtime's padding to its CUDA-graph bucket,
                 the median of 20 runs (host copies included)
  transformers   Qwen2VLForConditionalGeneration from the checkpoint in bf16, sdpa attention,
                 on the same GPU, after the server stopped: c=1 TTFT = generate(1 token), TPOT
                 = (generate(128) - TTFT) / 127, medians of 3; c=16 one batched generate
  parity         8 prompts (the generation gate's pictures and questions), the first 32
                 greedy tokens of mmaas (served) and of transformers bf16 ``generate`` with the
                 checkpoint's generation config (repetition penalty 1.05 on both): how many equal

Writes ``--out`` with exactly the issue's keys (mmaas.tpot_ms_c1, mmaas.ttft_ms_c1,
mmaas.tok_s_c16, mmaas.tok_s_c64, mmaas.vision_ms_1024, mmaas.gpu_mem_gb,
transformers.tpot_ms_c1, transformers.ttft_ms_c1, transformers.tok_s_c16,
parity.greedy_tokens_equal, parity.of; a figure not measured is null) and ``<out>-detail.json``
(every request's figures, the server's start log lines, the environment); the JSON also
holds ``configuration`` (precision, CUDA graphs, settings, GPU, versions). Prints a table.

Usage: ``python benchmarks/bench_qwen_vl_gpu.py MODEL_DIR --out OUT.json [--port 18000]
[--levels 1 16 64] [--skip-transformers]`` (MODEL_DIR from ``mmaas convert qwen2-vl
--config 2b --device gpu``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from benchmarks.qwen_vl_gpu_parts import (  # noqa: E402
    MAX_TOKENS,
    Server,
    configuration,
    parity_prompts,
    picture,
    question,
    server_ttft,
    transformers_figures,
    vision_ms,
)
from scripts import qwen_vl_client as client  # noqa: E402


def c1(url: str, model: str, data: bytes, text: str) -> list[dict[str, Any]]:
    """5 streamed requests one after another: tokens, client TTFT and TPOT (ms)."""
    runs = []
    for _ in range(5):
        times = [t for _, _, t in client.stream(url, model, text, [data], max_tokens=MAX_TOKENS)]
        tpot = (times[-1] - times[0]) / (len(times) - 1) * 1000 if len(times) > 1 else None
        runs.append({"tokens": len(times), "client_ttft_ms": times[0] * 1000, "tpot_ms": tpot})
    return runs


def concurrent(url: str, model: str, data: bytes, text: str, level: int) -> dict[str, Any]:
    """``level`` ModelInfer requests at once: tokens, wall time, aggregate tok/s."""
    counts = [0] * level
    failures: list[str] = []

    def one(index: int) -> None:
        try:
            counts[index] = len(client.ask(url, model, text, [data], max_tokens=MAX_TOKENS).ids)
        except client.ClientError as exc:
            failures.append(str(exc))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(level)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    return {"level": level, "tokens": sum(counts), "wall_s": wall,
            "tok_s": sum(counts) / wall, "failures": failures[:3]}  # fmt: skip


def served(args: argparse.Namespace, detail: dict[str, Any]) -> dict[str, Any]:
    """The mmaas figures through its server (module docstring)."""
    figures: dict[str, Any] = {}
    with Server(args.model, args.port, detail) as server:
        url, model, data = server.url, server.model, picture()
        text = question(args.model / "tokenizer.json")
        detail["question"] = text
        for _ in range(2):  # warm-up: every shape of the first requests
            client.ask(url, model, text, [data], max_tokens=8)
        before = server_ttft(server.metrics_url)
        runs = c1(url, model, data, text)
        after = server_ttft(server.metrics_url)
        detail["c1"] = runs
        figures["tpot_ms_c1"] = statistics.median(r["tpot_ms"] for r in runs if r["tpot_ms"])
        figures["ttft_ms_c1"] = (after[0] - before[0]) / max(after[1] - before[1], 1) * 1000
        for level in [lv for lv in args.levels if lv > 1]:
            rounds = [concurrent(url, model, data, text, level) for _ in range(2)]
            detail[f"c{level}"] = rounds
            if level in (16, 64):  # the keys; other levels stay in the detail
                figures[f"tok_s_c{level}"] = max(r["tok_s"] for r in rounds)
        figures["gpu_mem_gb"] = server.gpu_memory_gb()
        detail["parity_mmaas"] = [
            client.ask(url, model, q, images, max_tokens=32).ids for q, images in parity_prompts()
        ]
    return figures


def main() -> int:
    """Run every part (module docstring); print the table; write the two JSON files."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--port", type=int, default=18000)
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--skip-transformers", action="store_true")
    args = parser.parse_args()
    detail: dict[str, Any] = {"model": str(args.model), "levels": args.levels}
    ours: dict[str, Any] = dict.fromkeys(
        ("tpot_ms_c1", "ttft_ms_c1", "tok_s_c16", "tok_s_c64", "vision_ms_1024", "gpu_mem_gb")
    )
    theirs: dict[str, Any] = dict.fromkeys(("tpot_ms_c1", "ttft_ms_c1", "tok_s_c16"))
    parity: dict[str, Any] = {"greedy_tokens_equal": None, "of": None}
    for name, part in (
        ("served", lambda: ours.update(served(args, detail))),
        ("vision", lambda: ours.update(vision_ms_1024=vision_ms(args.model))),
        ("transformers", lambda: _transformers(args, theirs, parity, detail)),
    ):
        started = time.perf_counter()
        try:
            part()
        except Exception as exc:  # a part that fails leaves its figures null; the rest runs
            detail[f"{name}_error"] = f"{type(exc).__name__}: {exc}"
        detail[f"{name}_s"] = time.perf_counter() - started
    result = {"mmaas": ours, "transformers": theirs, "parity": parity,
              "configuration": configuration(args.model)}  # fmt: skip
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    args.out.with_name(args.out.stem + "-detail.json").write_text(
        json.dumps(detail, indent=2, default=str) + "\n"
    )
    print(f"{'figure':24s} {'mmaas':>10s} {'transformers':>13s} {'goal':>8s}")
    for key, goal in (
        ("tpot_ms_c1", "<=2.4"),
        ("ttft_ms_c1", "<=60"),
        ("tok_s_c16", ""),
        ("tok_s_c64", ">=10000"),
        ("vision_ms_1024", "<=5"),
        ("gpu_mem_gb", ""),
    ):
        print(f"{key:24s} {_fmt(ours.get(key)):>10s} {_fmt(theirs.get(key)):>13s} {goal:>8s}")
    print(f"parity: {parity['greedy_tokens_equal']} of {parity['of']}; "
          f"errors: {[k for k in detail if k.endswith('_error')]}")  # fmt: skip
    return 0


def _transformers(args: argparse.Namespace, theirs: dict[str, Any], parity: dict[str, Any],
                  detail: dict[str, Any]) -> None:  # fmt: skip
    if args.skip_transformers:
        return
    figures, reference = transformers_figures(args.model / "checkpoint", detail.get("question"))
    theirs.update(figures)
    ours = detail.get("parity_mmaas")
    if ours:
        parity["of"] = len(ours)
        parity["greedy_tokens_equal"] = sum(a == b for a, b in zip(ours, reference, strict=True))
        detail["parity_transformers"] = reference


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}"


if __name__ == "__main__":
    sys.exit(main())
