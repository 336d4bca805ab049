"""What the image's seal costs at start-up, in one run: the same built image started with
its seal (every listed file re-hashed before the front ends load: ``core/image_seal.py``)
and as an image made FROM it whose manifest drops the listing (resealed, so the server
skips the check), alternating start by start; each timed by the server's own "SERVING ...
(N s after process start)" line.

Usage: ``python benchmarks/sealed_start.py IMAGE [--starts 7]`` (a local image built by
``mmaas build``; needs the Docker engine); prints the medians and their ratio, writes
``benchmarks/results/sealed-start-<time>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
DOCKER = os.environ.get("MMAAS_DOCKER", "docker")
UNSEAL = (
    "from dataclasses import replace; from pathlib import Path; "
    "from mmaas.core.model_manifest import read_model_manifest, write_model_manifest; "
    "d = Path('/opt/mmaas/model'); write_model_manifest(d, replace(read_model_manifest(d), "
    "image_files=None))"
)


def docker(*args: str, stdin: str | None = None) -> str:
    """The docker client's output (fails on a non-zero exit)."""
    return subprocess.run(
        [DOCKER, *args], input=stdin, capture_output=True, text=True, check=True
    ).stdout


def logged_ready_s(image: str) -> float:
    """Start ``image``, wait for its SERVING line, stop it; the seconds it logged."""
    container = docker("run", "--detach", image).strip()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            logs = subprocess.run([DOCKER, "logs", container], capture_output=True, text=True)
            found = re.search(r"\(([\d.]+) s after process start\)", logs.stdout + logs.stderr)
            if found is not None:
                return float(found.group(1))
            time.sleep(0.1)
        raise SystemExit(f"{image} did not log SERVING within 120 s")
    finally:
        subprocess.run([DOCKER, "rm", "--force", container], capture_output=True)


def main() -> None:
    """Command-line entry (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("image")
    parser.add_argument("--starts", type=int, default=7)
    args = parser.parse_args()
    unsealed = f"{args.image.split(':')[0]}-unsealed:bench"
    dockerfile = f'FROM {args.image}\nUSER root\nRUN python -B -c "{UNSEAL}"\nUSER 10001\n'
    docker("build", "--quiet", "--tag", unsealed, "-", stdin=dockerfile)
    times: dict[str, list[float]] = {"sealed": [], "unsealed": []}
    load_before = os.getloadavg()
    try:
        for _ in range(args.starts):
            times["sealed"].append(logged_ready_s(args.image))
            times["unsealed"].append(logged_ready_s(unsealed))
    finally:
        subprocess.run([DOCKER, "image", "rm", "--force", unsealed], capture_output=True)
    medians = {name: median(values) for name, values in times.items()}
    ratio = medians["sealed"] / medians["unsealed"]
    print(f"{'image':>10} {'median s':>9}  starts")
    for name, values in times.items():
        print(f"{name:>10} {medians[name]:>9.2f}  {' '.join(f'{v:.2f}' for v in values)}")
    print(f"sealed / unsealed: {ratio:.2f}x (+{medians['sealed'] - medians['unsealed']:.2f} s)")
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = ROOT / "benchmarks" / "results" / f"sealed-start-{stamp}.json"
    load = {"before": list(load_before), "after": list(os.getloadavg())}
    out.write_text(
        json.dumps(
            {
                "image": args.image,
                "times_s": times,
                "medians_s": medians,
                "ratio": ratio,
                "load_average": load,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
