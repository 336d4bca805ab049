"""The bound on decoded pictures in flight (``MMAAS_MAX_DECODE_BYTES``), measured: 12
concurrent requests, each with one picture just inside the 64-megapixel budget (a 7900x8000
PNG), to ``mmaas serve models/qwen-vl`` (a copy) with the default bound (1 GiB) and with the
bound out of the way (64 GiB); the server's peak resident memory (``VmHWM`` of its process)
and the wall time of the 12, per setting. Prints a table and writes JSON under
benchmarks/results/.

Usage: ``python benchmarks/decode_memory.py [--concurrent 12]``
"""

from __future__ import annotations

import argparse
import base64
import http.client
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
FILES = ("model.yaml", "qwen2_vl_vision.onnx", "qwen2_vl_language.onnx", "runtime.json",
         "tokenizer.json", "embed_tokens.npy")  # fmt: skip
PORT = 18490
SIZE = (7900, 8000)  # 63.2 MP: inside the 64 MP pixel budget


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run(folder: Path, bound: int, body: bytes, concurrent: int) -> dict:
    mmaas = str(Path(sys.executable).parent / "mmaas")
    env = {**os.environ, "MMAAS_MAX_DECODE_BYTES": str(bound)}
    argv = [mmaas, "serve", str(folder), "--http-port", str(PORT), "--grpc-port",
            str(PORT + 1), "--metrics-port", "0"]  # fmt: skip
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/v2/health/ready", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("mmaas serve did not become ready") from None
                time.sleep(0.5)
        idle = peak_rss_mb(process.pid)
        statuses: list[int] = []

        def one() -> None:
            connection = http.client.HTTPConnection("127.0.0.1", PORT, timeout=900)
            connection.request("POST", "/v1/chat/completions", body,
                               {"Content-Type": "application/json"})  # fmt: skip
            reply = connection.getresponse()
            reply.read()
            statuses.append(reply.status)

        started = time.perf_counter()
        threads = [threading.Thread(target=one) for _ in range(concurrent)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
        return {"bound_bytes": bound, "peak_rss_mb_before": round(idle, 1),
                "peak_rss_mb": round(peak_rss_mb(process.pid), 1), "wall_s": round(wall, 2),
                "statuses": sorted(statuses)}  # fmt: skip
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrent", type=int, default=12)
    args = parser.parse_args()
    buffer = io.BytesIO()
    Image.new("RGB", SIZE, (90, 120, 150)).save(buffer, format="PNG")
    url = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()
    body = json.dumps({"model": "qwen-vl", "max_tokens": 1, "messages": [{"role": "user",
        "content": [{"type": "image_url", "image_url": {"url": url}},
                    {"type": "text", "text": "Hi"}]}]}).encode()  # fmt: skip
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "qwen-vl"
        folder.mkdir()
        for name in FILES:
            shutil.copy(ROOT / "models" / "qwen-vl" / name, folder / name)
        for bound in (1 << 30, 64 << 30):
            rows.append(run(folder, bound, body, args.concurrent))
    print(f"| MMAAS_MAX_DECODE_BYTES | peak RSS MB (idle -> after {args.concurrent} x "
          f"{SIZE[0]}x{SIZE[1]}) | wall s | statuses |")  # fmt: skip
    print("| --- | --- | --- | --- |")
    for row in rows:
        print(f"| {row['bound_bytes']} | {row['peak_rss_mb_before']} -> {row['peak_rss_mb']} | "
              f"{row['wall_s']} | {row['statuses']} |")  # fmt: skip
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = ROOT / "benchmarks" / "results" / f"decode-memory-{stamp}.json"
    out.write_text(json.dumps({"benchmark": "decode_memory", "concurrent": args.concurrent,
                               "picture": list(SIZE), "rows": rows}, indent=2) + "\n")  # fmt: skip
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
