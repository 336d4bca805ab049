"""Start-to-ready time of the server at this checkout against a baseline revision, in one
run: ``python -m mmaas.server`` on the same compiled model, alternating the two source
trees start by start (the baseline's ``toolkit`` exported with ``git archive``, with this
checkout's generated protocol stubs), each timed from spawn until ``ModelReady`` answers
true over gRPC, plus the server's own "s after process start" log line. Written for issue
12 (what the HTTP front end costs at start-up: baseline = main before it landed).

Usage: ``python benchmarks/ready_time.py --baseline 83f9f81 [--model ppocr-cls] [--starts 7]``;
prints the medians, writes ``benchmarks/results/ready-time-<time>.json``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from statistics import median
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from bench_servers import ROOT, mmaas_server
from mmaas.build.local import compile_local
from mmaas.core.files import atomic_write_text

STUBS = Path("mmaas") / "server" / "grpc" / "protocol"


def export(revision: str, into: Path) -> Path:
    """``toolkit/`` of ``revision`` under ``into``, with this checkout's protocol stubs."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision, "toolkit"], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    shutil.copytree(ROOT / "toolkit" / STUBS, into / "toolkit" / STUBS, dirs_exist_ok=True)
    return into / "toolkit"


def start_once(model_dir: Path, work: Path, model: str, toolkit: Path | None) -> dict[str, Any]:
    env = {"PYTHONPATH": str(toolkit)} if toolkit else {}
    server = mmaas_server(model_dir, work, f"ready-{'baseline' if toolkit else 'head'}", **env)
    try:
        ready_s = server.wait_ready(model)
    finally:
        server.stop()
    found = re.search(r"\(([\d.]+) s after process start\)", server.log.read_text())
    return {"ready_s": ready_s, "logged_s": float(found.group(1)) if found else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="git revision to compare with")
    parser.add_argument("--model", default="ppocr-cls")
    parser.add_argument("--starts", type=int, default=7, help="starts of each tree")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    _, model_dir = compile_local(ROOT / "models" / args.model)
    runs: dict[str, list[dict[str, Any]]] = {"baseline": [], "head": []}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="mmaas-ready-") as tmp:
        baseline = export(args.baseline, Path(tmp))
        for _ in range(args.starts):
            runs["baseline"].append(start_once(model_dir, Path(tmp), args.model, baseline))
            runs["head"].append(start_once(model_dir, Path(tmp), args.model, None))
    medians = {
        tree: {key: median(r[key] for r in found if r[key] is not None) for key in found[0]}
        for tree, found in runs.items()
    }
    result = {
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "baseline": args.baseline,
        "model": args.model,
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "runs": runs,
        "median": medians,
        "head_minus_baseline_ready_s": medians["head"]["ready_s"] - medians["baseline"]["ready_s"],
    }
    print(json.dumps(medians, indent=2))
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or ROOT / "benchmarks" / "results" / f"ready-time-{stamp}.json"
    atomic_write_text(out, json.dumps(result, indent=2) + "\n")
    print(out)


if __name__ == "__main__":
    main()
