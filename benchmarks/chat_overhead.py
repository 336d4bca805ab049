"""The OpenAI chat endpoint's overhead over the KServe generate endpoint: the same greedy
request (one picture as a base64 data URL, one question, max_tokens) to
``POST /v1/chat/completions`` and to ``POST /v2/models/qwen-vl/generate`` of one
``mmaas serve models/qwen-vl`` (a copy, compiled on this host), closed-loop clients at
concurrency 1 and 16 (keep-alive connections, one per client), each client alternating
the two endpoints request by request, so both meet the same load at the same moments (the
machine is shared: its noise then hits both alike). Per concurrency the table gives each
endpoint's median latency over --rounds phases and the median of the phases' ratios chat /
generate (goal: within 5%), with their range. Every chat answer is checked equal to the
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


def mixed(requests: dict[str, tuple[str, bytes]], clients: int, total: int) -> dict:
    """``total`` requests by ``clients`` closed-loop clients, each alternating the two
    endpoints (client i starts with endpoint i % 2), so both meet the same load at the
    same moments -> {endpoint: median latency ms}, the wall time and the answers."""
    latencies: dict[str, list[float]] = {kind: [] for kind in requests}
    texts: set[str] = set()
    left = iter(range(total))
    lock = threading.Lock()
    kinds = list(requests)

    def client(index: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", PORT, timeout=600)
        turn = index
        while True:
            with lock:
                if next(left, None) is None:
                    break
            kind = kinds[turn % 2]
            turn += 1
            path, body = requests[kind]
            started = time.perf_counter()
            connection.request("POST", path, body, {"Content-Type": "application/json"})
            reply = connection.getresponse()
            data = reply.read()
            elapsed = time.perf_counter() - started
            assert reply.status == 200, data[:500]
            with lock:
                latencies[kind].append(elapsed * 1000)
                texts.add(answer_text(kind, json.loads(data)))
        connection.close()

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    return {"median_ms": {kind: statistics.median(v) for kind, v in latencies.items()},
            "rps": total / wall, "texts": texts}  # fmt: skip


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
    parser.add_argument("--requests", type=int, default=8, help="per client and phase")
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
            runs: dict[int, list[dict]] = {}
            for clients in (1, 16):
                mixed(requests, clients, 2 * clients)  # warm both paths
                total = args.requests * max(2, clients)
                runs[clients] = [mixed(requests, clients, total) for _ in range(args.rounds)]
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(60)
    report(runs, args, load_before)


def report(runs: dict[int, list[dict]], args: argparse.Namespace, before: float) -> None:
    rows = []
    for clients, phases in runs.items():
        texts = set().union(*(phase["texts"] for phase in phases))
        assert len(texts) == 1, f"the endpoints answered differently: {texts}"
        ratios = [p["median_ms"]["chat"] / p["median_ms"]["generate"] for p in phases]
        rows.append({
            "concurrency": clients,
            "generate_p50_ms": statistics.median(p["median_ms"]["generate"] for p in phases),
            "chat_p50_ms": statistics.median(p["median_ms"]["chat"] for p in phases),
            "ratio_median": statistics.median(ratios),
            "ratio_min_max": [min(ratios), max(ratios)],
            "rps_both": statistics.median(p["rps"] for p in phases),
            "phases": [{k: round(v, 1) for k, v in p["median_ms"].items()} for p in phases],
        })  # fmt: skip
    print("| concurrency | generate p50 ms | chat p50 ms | chat / generate (median of phases; "
          "min..max) | req/s, both |")  # fmt: skip
    print("| --- | --- | --- | --- | --- |")
    for row in rows:
        low, high = row["ratio_min_max"]
        print(
            f"| {row['concurrency']} | {row['generate_p50_ms']:.1f} | {row['chat_p50_ms']:.1f} "
            f"| {row['ratio_median']:.3f} ({low:.3f}..{high:.3f}) | {row['rps_both']:.2f} |"
        )
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = ROOT / "benchmarks" / "results" / f"chat-overhead-{stamp}.json"
    out.write_text(json.dumps({
        "benchmark": "chat_overhead", "requests_per_client_and_phase": args.requests,
        "phases": args.rounds, "max_tokens": args.max_tokens, "picture": args.picture.name,
        "rows": rows, "load_average_before": before, "load_average_after": os.getloadavg()[0],
    }, indent=2) + "\n")  # fmt: skip
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
