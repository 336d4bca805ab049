"""The OpenAI chat endpoint's overhead over the KServe generate endpoint: the same greedy
request (one picture as a base64 data URL, one question, max_tokens) to
``POST /v1/chat/completions`` and to ``POST /v2/models/qwen-vl/generate`` of one
``mmaas serve models/qwen-vl`` (a copy, compiled on this host), closed-loop clients at
concurrency 1 and 16 (keep-alive connections, one per client). The two endpoints run
alternately, in shuffled order, in short phases over --rounds (machine noise hits both
alike; the machine is shared, so each phase's figures are kept in the JSON); per
concurrency the table gives each endpoint's median request latency and throughput and the
ratio chat / generate (goal: within 5%). Every chat answer is checked equal to the
generate answer. Prints a table and writes JSON under benchmarks/results/.

Usage: ``python benchmarks/chat_overhead.py [--requests 32] [--rounds 3] [--max-tokens 8]
[--picture models/qwen-vl/pictures/rocket.jpg]``
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILES = ("model.yaml", "qwen2_vl_vision.onnx", "qwen2_vl_language.onnx", "runtime.json",
         "tokenizer.json", "embed_tokens.npy")  # fmt: skip
PORT = 18480


def bodies(picture: Path, max_tokens: int) -> dict[str, tuple[str, bytes]]:
    """The same request for each endpoint: (path, JSON body)."""
    url = "data:image/jpeg;base64," + base64.b64encode(picture.read_bytes()).decode()
    question = "Describe this picture."
    chat = {"model": "qwen-vl", "max_tokens": max_tokens, "temperature": 0, "messages": [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                     {"type": "text", "text": question}]}]}  # fmt: skip
    generate = {"text_input": question, "image": [url], "max_tokens": max_tokens}
    return {
        "chat": ("/v1/chat/completions", json.dumps(chat).encode()),
        "generate": ("/v2/models/qwen-vl/generate", json.dumps(generate).encode()),
    }


def answer_text(kind: str, document: dict) -> str:
    if kind == "chat":
        return str(document["choices"][0]["message"]["content"])
    return str(document["text_output"])


def load(path: str, body: bytes, kind: str, clients: int, total: int) -> dict:
    """``total`` requests by ``clients`` closed-loop clients -> latencies, wall time, texts."""
    latencies: list[float] = []
    texts: set[str] = set()
    left = iter(range(total))
    lock = threading.Lock()

    def client() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", PORT, timeout=600)
        while True:
            with lock:
                if next(left, None) is None:
                    break
            started = time.perf_counter()
            connection.request("POST", path, body, {"Content-Type": "application/json"})
            reply = connection.getresponse()
            data = reply.read()
            elapsed = time.perf_counter() - started
            assert reply.status == 200, data[:500]
            with lock:
                latencies.append(elapsed)
                texts.add(answer_text(kind, json.loads(data)))
        connection.close()

    started = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    return {"latency_ms": statistics.median(latencies) * 1000, "rps": total / wall,
            "texts": texts}  # fmt: skip


def serve(folder: Path) -> subprocess.Popen[bytes]:
    mmaas = str(Path(sys.executable).parent / "mmaas")
    argv = [mmaas, "serve", str(folder), "--http-port", str(PORT), "--grpc-port",
            str(PORT + 1), "--metrics-port", "0"]  # fmt: skip
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/v2/health/ready", timeout=2):
                return process
        except OSError:
            time.sleep(0.5)
    process.kill()
    raise SystemExit("mmaas serve did not become ready")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=16, help="per client and phase")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument(
        "--picture", type=Path, default=ROOT / "models" / "qwen-vl" / "pictures" / "rocket.jpg"
    )
    args = parser.parse_args()
    requests = bodies(args.picture, args.max_tokens)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "qwen-vl"
        folder.mkdir()
        for name in FILES:
            shutil.copy(ROOT / "models" / "qwen-vl" / name, folder / name)
        load_before = os.getloadavg()[0]
        process = serve(folder)
        try:
            runs: dict[int, dict[str, list[dict]]] = {}
            for clients in (1, 16):
                runs[clients] = {"chat": [], "generate": []}
                for kind, (path, body) in requests.items():  # warm both paths
                    load(path, body, kind, clients, clients)
                for _ in range(args.rounds):
                    for kind in random.sample(list(requests), 2):
                        path, body = requests[kind]
                        total = args.requests * max(1, clients // 4)
                        runs[clients][kind].append(load(path, body, kind, clients, total))
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(60)
    report(runs, args, load_before)


def report(runs: dict[int, dict[str, list[dict]]], args: argparse.Namespace, before: float) -> None:
    rows = []
    for clients, kinds in runs.items():
        texts = set().union(*(r["texts"] for rs in kinds.values() for r in rs))
        assert len(texts) == 1, f"the endpoints answered differently: {texts}"
        med = {kind: {"latency_ms": statistics.median(r["latency_ms"] for r in rs),
                      "rps": statistics.median(r["rps"] for r in rs)}
               for kind, rs in kinds.items()}  # fmt: skip
        rows.append({"concurrency": clients, **{f"{k}_{m}": v for k, d in med.items()
                                                for m, v in d.items()},
                     "latency_ratio": med["chat"]["latency_ms"] / med["generate"]["latency_ms"],
                     "throughput_ratio": med["chat"]["rps"] / med["generate"]["rps"],
                     "rounds": {kind: [[round(r["latency_ms"], 1), round(r["rps"], 3)] for r in rs]
                                for kind, rs in kinds.items()}})  # fmt: skip
    print("| concurrency | generate p50 ms / req/s | chat p50 ms / req/s | chat/generate "
          "latency | throughput |")  # fmt: skip
    print("| --- | --- | --- | --- | --- |")
    for row in rows:
        print(f"| {row['concurrency']} | {row['generate_latency_ms']:.1f} / "
              f"{row['generate_rps']:.2f} | {row['chat_latency_ms']:.1f} / {row['chat_rps']:.2f} | "
              f"{row['latency_ratio']:.3f} | {row['throughput_ratio']:.3f} |")  # fmt: skip
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = ROOT / "benchmarks" / "results" / f"chat-overhead-{stamp}.json"
    out.write_text(json.dumps({
        "benchmark": "chat_overhead", "requests_per_phase": args.requests, "rounds": args.rounds,
        "max_tokens": args.max_tokens, "picture": args.picture.name, "rows": rows,
        "load_average_before": before, "load_average_after": os.getloadavg()[0],
    }, indent=2) + "\n")  # fmt: skip
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
