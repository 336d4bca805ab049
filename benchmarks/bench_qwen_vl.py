"""Time to first token and decode tokens/s: the mmaas qwen-vl image (through gRPC) next to
transformers' ``generate`` on the same CPU, checkpoint, picture and prompt, in one run, at
concurrency 1 and 4. Prints a table and writes JSON under benchmarks/results/.

  mmaas        the image `mmaas build models/qwen-vl` made, in a container on this host (its
               defaults: ONNX Runtime with one intra-op thread per core, continuous
               batching of decode steps), driven by tritonclient gRPC ModelStreamInfer; the
               times are the client's (the network hop and protocol are in them)
  transformers Qwen2VLForConditionalGeneration.generate(do_sample=False) on the checkpoint in
               models/qwen-vl/checkpoint/, its default CPU configuration (eager PyTorch, SDPA
               attention, DynamicCache), torch.set_num_threads(cores); c=4 twice: the four
               requests one after another (what a server without batching does) and, as the
               stronger peer, one batched generate of the four (left padding)

TTFT: from sending the encoded picture to the first token (decode, preprocessing, vision,
prefill). Decode tokens/s: (tokens - 1) / (last token - first token). Aggregate tokens/s at
c=4: all tokens / wall time. The two sides run alternately, never at once, interleaved over
--repeats (machine noise hits both alike); "best" is the least disturbed repeat per metric,
"median" the median; the load average is recorded. Every answer is greedy; the mmaas and
transformers ids are checked equal.

Usage: ``python benchmarks/bench_qwen_vl.py [--image mmaas/qwen-vl:2.0.0] [--max-tokens 64]
[--repeats 3] [--picture models/qwen-vl/pictures/grace_hopper.jpg]`` (needs Docker and the
built image; takes the benchmark lock's discipline: run it under
``flock /tmp/mmaas-bench.lock``).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import torch  # noqa: E402
from PIL import Image  # noqa: E402
from scripts import qwen_vl_client as client  # noqa: E402
from transformers.generation.streamers import BaseStreamer  # noqa: E402

from docker_fixtures import run_container, wait_for_grpc_serving  # noqa: E402
from mmaas.pipelines.qwen2_vl.export.reference import Reference  # noqa: E402

DOCKER = [os.environ.get("MMAAS_DOCKER", "/usr/bin/docker")]


class Clock(BaseStreamer):
    """A generate() streamer recording when each new token arrives (the first put() is the
    prompt; with a batch one put() carries a token of every row)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.prompt_seen = False

    def put(self, value: object) -> None:
        if self.prompt_seen:
            self.times.append(time.perf_counter())
        self.prompt_seen = True

    def end(self) -> None:
        pass


def rates(start: float, times: list[float]) -> dict:
    decode = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else float("nan")
    return {"ttft_s": times[0] - start, "decode_tok_s": decode, "tokens": len(times)}


def ours_c1(url: str, data: bytes, prompt: str, n: int) -> tuple[dict, list[int]]:
    start = time.perf_counter()
    pieces = list(client.stream(url, "qwen-vl", prompt, [data], max_tokens=n))
    return rates(start, [start + t for _, _, t in pieces]), [token for _, token, _ in pieces]


@torch.no_grad()
def hf_c1(ref: Reference, data: bytes, prompt: str, n: int) -> tuple[dict, list[int]]:
    start = time.perf_counter()
    inputs = ref.inputs([Image.open(io.BytesIO(data))], prompt)
    clock = Clock()
    out = ref.model.generate(**inputs, max_new_tokens=n, do_sample=False, streamer=clock)
    ids = out[0, inputs["input_ids"].shape[1] :].tolist()
    return rates(start, clock.times), ids


def ours_c4(url: str, data: bytes, prompt: str, n: int, concurrency: int) -> dict:
    arrivals: list[list[float]] = [[] for _ in range(concurrency)]

    def one(index: int) -> None:
        begin = time.perf_counter()
        pieces = client.stream(url, "qwen-vl", prompt, [data], max_tokens=n)
        arrivals[index] = [begin + t for _, _, t in pieces]

    start = time.perf_counter()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    total = sum(len(times) for times in arrivals)
    return {
        "aggregate_tok_s": total / wall,
        "wall_s": wall,
        "tokens": total,
        "mean_ttft_s": statistics.mean(times[0] - start for times in arrivals),
    }


def hf_sequential(ref: Reference, data: bytes, prompt: str, n: int, concurrency: int) -> dict:
    start = time.perf_counter()
    runs = [hf_c1(ref, data, prompt, n)[0] for _ in range(concurrency)]
    wall = time.perf_counter() - start
    waits, elapsed = [], 0.0  # request i waits for the whole generations before it
    for run in runs:
        waits.append(elapsed + run["ttft_s"])
        elapsed += run["ttft_s"] + (run["tokens"] - 1) / run["decode_tok_s"]
    total = sum(run["tokens"] for run in runs)
    return {"aggregate_tok_s": total / wall, "wall_s": wall, "tokens": total,
            "mean_ttft_s": statistics.mean(waits)}  # fmt: skip


@torch.no_grad()
def hf_batched(ref: Reference, data: bytes, prompt: str, n: int, concurrency: int) -> dict:
    start = time.perf_counter()
    ref.tokenizer.padding_side = "left"
    images = [Image.open(io.BytesIO(data)) for _ in range(concurrency)]
    inputs = ref.processor(text=[ref.prompt(1, prompt)] * concurrency, images=images,
                           padding=True, return_tensors="pt")  # fmt: skip
    clock = Clock()
    ref.model.generate(**inputs, max_new_tokens=n, do_sample=False, streamer=clock)
    wall = time.perf_counter() - start
    total = len(clock.times) * concurrency
    return {"aggregate_tok_s": total / wall, "wall_s": wall, "tokens": total,
            "mean_ttft_s": clock.times[0] - start}  # fmt: skip


def summarise(runs: dict[str, list[dict]]) -> dict[str, dict[str, dict]]:
    """Median and best (lowest time, highest rate) of each metric over the repeats."""

    def best(key: str, values: list[float]) -> float:
        return (min if key.endswith("_s") and "tok" not in key else max)(values)

    median = {k: {m: statistics.median(r[m] for r in v) for m in v[0]} for k, v in runs.items()}
    return {
        "median": median,
        "best": {k: {m: best(m, [r[m] for r in v]) for m in v[0]} for k, v in runs.items()},
    }


def ratios(summary: dict[str, dict]) -> dict[str, float]:
    """mmaas / transformers for rates; transformers / mmaas for TTFT."""
    o, h = summary["mmaas_c1"], summary["transformers_c1"]
    c4 = summary["mmaas_c4"]
    return {
        "decode_c1": o["decode_tok_s"] / h["decode_tok_s"],
        "ttft_c1": h["ttft_s"] / o["ttft_s"],
        "aggregate_c4_vs_sequential": c4["aggregate_tok_s"]
        / summary["transformers_c4_sequential"]["aggregate_tok_s"],
        "aggregate_c4_vs_batched": c4["aggregate_tok_s"]
        / summary["transformers_c4_batched"]["aggregate_tok_s"],
    }


def table(title: str, summary: dict[str, dict]) -> None:
    nan = float("nan")
    print(f"{title}\n{'run':<28}{'TTFT s':>9}{'decode tok/s':>14}{'aggregate tok/s':>17}")
    for key, row in summary.items():
        ttft = row.get("ttft_s", row.get("mean_ttft_s", nan))
        print(f"{key:<28}{ttft:>9.3f}{row.get('decode_tok_s', nan):>14.1f}"
              f"{row.get('aggregate_tok_s', nan):>17.1f}")  # fmt: skip


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default="mmaas/qwen-vl:2.0.0")
    parser.add_argument("--picture", type=Path,
                        default=ROOT / "models/qwen-vl/pictures/grace_hopper.jpg")  # fmt: skip
    parser.add_argument("--prompt", default="Describe this picture.")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    threads = len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    ref = Reference(ROOT / "models/qwen-vl/checkpoint")
    data, n, c = args.picture.read_bytes(), args.max_tokens, args.concurrency
    runs: dict[str, list[dict]] = {k: [] for k in (
        "mmaas_c1", "transformers_c1", "mmaas_c4", "transformers_c4_sequential",
        "transformers_c4_batched")}  # fmt: skip
    loads = [os.getloadavg()]
    with run_container(DOCKER, args.image, ports=[8001]) as container:
        wait_for_grpc_serving(container.port, timeout=120, container=container)
        url = f"127.0.0.1:{container.port}"
        ours_c1(url, data, args.prompt, 8)  # warm-up of both (first-run allocations)
        hf_c1(ref, data, args.prompt, 8)
        for _ in range(args.repeats):
            ours, ours_ids = ours_c1(url, data, args.prompt, n)
            theirs, their_ids = hf_c1(ref, data, args.prompt, n)
            if ours_ids != their_ids:
                print("bench_qwen_vl: error: mmaas and transformers ids differ", file=sys.stderr)
                return 1
            runs["mmaas_c1"].append(ours)
            runs["transformers_c1"].append(theirs)
            runs["mmaas_c4"].append(ours_c4(url, data, args.prompt, n, c))
            runs["transformers_c4_sequential"].append(hf_sequential(ref, data, args.prompt, n, c))
            runs["transformers_c4_batched"].append(hf_batched(ref, data, args.prompt, n, c))
            loads.append(os.getloadavg())
    summaries = summarise(runs)
    result = {name: ratios(summary) for name, summary in summaries.items()}
    for name, summary in summaries.items():
        table(f"{name} of {args.repeats} interleaved repeats (max_tokens {n})", summary)
        print("ratios:", json.dumps({k: round(v, 2) for k, v in result[name].items()}))
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    output = args.output or ROOT / "benchmarks" / "results" / f"qwen-vl-{stamp}.json"
    config = {"image": args.image, "picture": args.picture.name, "prompt": args.prompt,
              "max_tokens": n, "concurrency": c, "repeats": args.repeats, "threads": threads,
              "load_average": loads, "cpu": os.cpu_count()}  # fmt: skip
    body = {"config": config, "runs": runs, **summaries, "ratios": result}
    temp = output.with_name(output.name + ".tmp")
    temp.write_text(json.dumps(body, indent=1) + "\n")
    temp.replace(output)
    print(f"wrote {output.relative_to(ROOT) if output.is_relative_to(ROOT) else output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
