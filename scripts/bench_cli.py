"""Wall times of the real ``mmaas`` command for the build benchmark (scripts/bench_build.py),
each the median of several runs of the console script in a subprocess, as a user starts
it: ``mmaas --help`` beside ``python -c pass`` (the interpreter's own start, the floor),
and a no-op rebuild (``mmaas build --json`` of a model whose image is current: no Docker
build runs), which adds the interpreter's start and the build verb's imports to the
in-process ``unchanged`` case."""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mmaas.build.cache.reuse import CacheOptions
from mmaas.core import proc

MMAAS = Path(sys.executable).with_name("mmaas")  # the console script beside this Python
HELP_REPEATS = 15  # runs of `mmaas --help` and of `python -c pass`
NOOP_REPEATS = 5  # runs of the no-op `mmaas build`


def wall_s(argv: Sequence[str]) -> tuple[float, str]:
    """Seconds ``argv`` takes from start to exit, and its stdout.

    Raises:
        ProcessError: it exits non-zero.
    """
    started = time.perf_counter()
    done = proc.run(argv)
    return round(time.perf_counter() - started, 4), done.stdout


def median_of(name: str, runs: list[float]) -> dict[str, Any]:
    """``{NAME_s: median, NAME_runs_s: every run}`` (seconds)."""
    return {f"{name}_s": round(statistics.median(runs), 4), f"{name}_runs_s": runs}


def help_times(repeats: int = HELP_REPEATS) -> dict[str, Any]:
    """``mmaas --help`` and ``python -c pass``, alternated so that both see the same load:
    ``mmaas_help_s`` and ``python_floor_s`` (medians) with each run's seconds."""
    runs: dict[str, list[float]] = {"mmaas_help": [], "python_floor": []}
    for _ in range(repeats):
        runs["mmaas_help"].append(wall_s([str(MMAAS), "--help"])[0])
        runs["python_floor"].append(wall_s([sys.executable, "-c", "pass"])[0])
    result: dict[str, Any] = {}
    for name, found in runs.items():
        result.update(median_of(name, found))
    return result


def noop_rebuild_times(
    folder: Path, cache: CacheOptions, bundle: Path, repeats: int = NOOP_REPEATS
) -> dict[str, Any]:
    """``mmaas build --json FOLDER`` with the engine cache and CA bundle of the in-process
    builds, on a model whose image is current: ``noop_rebuild_s`` (median) with each run's
    seconds.

    Raises:
        RuntimeError: a run was no no-op (its engine cache outcome is not ``current``).
    """
    argv = [str(MMAAS), "build", str(folder), "--json", "--ca-bundle", str(bundle)]
    if cache.root is not None:
        argv += ["--engine-cache-dir", str(cache.root)]
    if cache.registry is not None:
        argv += ["--engine-cache-registry", cache.registry.address]
    runs = []
    for _ in range(repeats):
        seconds, stdout = wall_s(argv)
        outcome = json.loads(stdout)["engine_cache"]
        if outcome != "current":
            raise RuntimeError(f"{' '.join(argv)}: engine cache {outcome!r}, not a no-op")
        runs.append(seconds)
    return median_of("noop_rebuild", runs)


def print_wall_times(
    wall: dict[str, Any], unchanged: dict[str, Any], machine: dict[str, Any]
) -> None:
    """The table of :func:`help_times` and :func:`noop_rebuild_times` (``wall``), the no-op
    rebuild beside the in-process ``unchanged`` case, and the machine's load average."""
    print("\nwall time of the real command (median of N runs, a subprocess each)")
    rows = (
        ("mmaas --help", "mmaas_help", ""),
        ("python -c pass (the floor)", "python_floor", ""),
        ("no-op rebuild (mmaas build)", "noop_rebuild",
         f"  in process: {unchanged['seconds']:.3f} s (the unchanged case)"),
    )  # fmt: skip
    for label, key, note in rows:
        runs = len(wall[f"{key}_runs_s"])
        print(f"  {label:28s} {wall[f'{key}_s']:8.3f} s  N={runs}{note}")
    start, end = (
        " ".join(f"{x:.2f}" for x in machine[k]) for k in ("load_avg_at_start", "load_avg")
    )
    print(f"  load average (1, 5, 15 min) at the start {start}, at the end {end}")
