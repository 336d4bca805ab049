"""Build benchmark: what a rebuild costs compared with a cold build and with a new model's
build, and the wall time of the real ``mmaas --help`` and of a no-op rebuild, in one run.

Cases, in order, for one model (default ppocr-det), each timed end to end (``mmaas build``:
key, cache lookup, Docker builds, copy-out verification, labels):

1. ``cold``: nothing cached for this run (engine compiled, framework layer built);
2. ``unchanged``: the same build again: the image is current, no Docker build runs;
   median of ``REPEATS`` runs, alternating with case 3;
3. ``unchanged_rebuild``: the same build with ``--rebuild`` (``reuse_image=False``): both
   Docker builds (package, labels) run, every step cached;
4. ``new_model``: a copy of the model under another name and repository, with an engine
   setting no other case uses and an empty engine cache: its engine is compiled, the
   framework layer is cached (the yardstick of image reuse: ``unchanged`` should cost at
   most 5% of it);
5. ``non_engine_change``: README edited and runtime settings changed;
6. ``engine_change``: ``build.onnxruntime.graph_optimization_level`` changed (recompile);
7. ``fresh_docker_registry_cache``: a fresh Docker state with a warm registry cache: the
   run's images removed, an empty local engine cache, and no build-cache record that
   matches; the engine comes from the registry.

Wall times of the real command (``wall_times`` in the JSON, scripts/bench_cli.py), each the
median of several runs of the console script in a subprocess: ``mmaas_help_s`` (``mmaas
--help``; goal: under 0.3 s on a quiet machine) beside ``python_floor_s`` (``python -c
pass``), and ``noop_rebuild_s``: ``mmaas build --json`` after case 2, the image current
(case 2 plus the interpreter's start and the build verb's imports).

Isolation on a shared Docker engine: the run's images are named ``mmaas-bench/<model>``
and removed at the end. Every build passes a CA bundle made for the run (the host's bundle
plus a comment naming the run): it is copied in the framework stage, so that stage and
every step after it get build-cache keys no other build has, and case 7 uses a second
bundle, so it matches none of cases 1-6 either: a fresh Docker state. The bundle is not an
engine input, so the engine key stays the same. ``docker builder prune`` is NOT run:
BuildKit cannot tell which cache records this run made (they carry no owner, and other
engineers build at the same time), so a prune by filter could delete their cache; BuildKit's
garbage collection reclaims the run's records. The pip download cache (a BuildKit cache
mount shared by all builds) stays warm: the framework layer is built in cases 1 and 7,
but its wheels are not downloaded again.

The registry is a local ``docker-registry`` on loopback (``tests/registry_fixtures``)
unless ``--registry HOST:PORT/NS`` is given. Prints every case as a ratio of the cold
build and the image's size per layer group (base, runtime framework, engine + manifest,
mmaas code; bytes as Docker counts them, and gzip-compressed as a registry stores them),
and writes the whole result as JSON under ``benchmarks/results/``.

Each peer runs at its best: ``unchanged_rebuild`` (every Docker build run again) has the
engine-cache hit and every BuildKit step cached (the cheapest it can be), not a cold one.

Usage: ``python scripts/bench_build.py [--model models/ppocr-det] [--registry HOST:PORT/NS]
[--base mmaas/base:bookworm] [--out FILE]``
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import re
import secrets
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench_cli import help_times, noop_rebuild_times, print_wall_times  # this folder
from bench_docker import layer_sizes, registry_for, remove_images
from mmaas.build import docker as docker_engine
from mmaas.build.cache.reuse import CacheOptions
from mmaas.build.pipeline import build_image
from mmaas.build.registry import RegistryTarget
from mmaas.core import proc
from mmaas.core.errors import ProcessError
from mmaas.core.files import atomic_write_text

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "mmaas-bench"
REPEATS = 3  # runs of each unchanged case (their median is reported)
SYSTEM_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
SNAPSHOT_ENV = "MMAAS_BENCH_CODE_COMMIT"  # set in the run on the code snapshot


def main() -> None:
    """Command-line entry: run the cases, print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=ROOT / "models" / "ppocr-det")
    parser.add_argument("--registry", help="HOST:PORT/NS (default: a local docker-registry)")
    parser.add_argument("--base", default="mmaas/base:bookworm", help="base image of the model")
    parser.add_argument("--out", type=Path, default=None, help="JSON file to write")
    args = parser.parse_args()
    if not os.environ.get(SNAPSHOT_ENV):
        sys.exit(run_on_snapshot(sys.argv[1:]))
    run = secrets.token_hex(4)
    with (
        tempfile.TemporaryDirectory(prefix="mmaas-bench-build-") as scratch,
        registry_for(args.registry, Path(scratch)) as registry,
    ):
        result = bench(args.model, Path(scratch), registry, args.base, run)
    out = args.out or ROOT / "benchmarks" / "results" / (
        f"build-{args.model.name}-{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}.json"
    )
    atomic_write_text(out, json.dumps(result, indent=2) + "\n")
    print_table(result)
    print(f"\nwrote {out}")


def run_on_snapshot(argv: list[str]) -> int:
    """Run this script again on a copy of ``toolkit/mmaas`` and ``templates/`` taken now
    (first on ``PYTHONPATH``): others edit the shared working tree while the bench runs,
    and an edited engine input (the builder stage's code, the pinned requirements) would
    rightly change the engine key between two cases. Returns the exit code."""
    with tempfile.TemporaryDirectory(prefix="mmaas-bench-code-") as scratch:
        code = Path(scratch)
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        shutil.copytree(ROOT / "toolkit" / "mmaas", code / "toolkit" / "mmaas", ignore=ignore)
        shutil.copytree(ROOT / "templates", code / "templates")
        path = os.pathsep.join(
            p for p in (str(code / "toolkit"), os.environ.get("PYTHONPATH")) if p
        )
        env = {
            SNAPSHOT_ENV: proc.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"]).stdout.strip(),
            "PYTHONPATH": path,
        }
        try:
            proc.stream([sys.executable, str(Path(__file__).resolve()), *argv], env=env)
        except ProcessError as exc:
            return exc.returncode or 1
    return 0


def bench(
    model: Path, scratch: Path, registry: RegistryTarget, base: str, run: str
) -> dict[str, Any]:
    """Run the cases on a copy of ``model``; return the JSON-ready result."""
    folder = scratch / model.name
    shutil.copytree(model, folder, ignore=shutil.ignore_patterns(".mmaas"))
    spec = (folder / "model.yaml").read_text()
    repository = f"{NAMESPACE}/{model.name}"
    engine_spec = spec.replace(
        "# build:", "build: {onnxruntime: {graph_optimization_level: extended}}\n# build:", 1
    )
    cases: dict[str, Any] = {}
    load_at_start = os.getloadavg()
    wall = help_times()
    try:
        bundle = run_bundle(scratch, run, "1")
        write_spec(folder, spec, repository, base)
        cache = CacheOptions(root=scratch / "engines-1", registry=registry)
        cases["cold"] = timed_build(folder, cache, bundle)
        runs: dict[str, list[dict[str, Any]]] = {"unchanged": [], "unchanged_rebuild": []}
        for _ in range(REPEATS):
            runs["unchanged"].append(timed_build(folder, cache, bundle))
            rebuild = CacheOptions(root=cache.root, registry=registry, reuse_image=False)
            runs["unchanged_rebuild"].append(timed_build(folder, rebuild, bundle))
        cases.update({name: median_case(found) for name, found in runs.items()})
        wall.update(noop_rebuild_times(folder, cache, bundle))
        cases["new_model"] = new_model_build(model, scratch, base, bundle)
        (folder / "README.md").write_text("An edited README: not an engine input.\n")
        write_spec(folder, spec + "runtime: {instance_count: 2}\n", repository, base)
        cases["non_engine_change"] = timed_build(folder, cache, bundle)
        write_spec(folder, engine_spec, repository, base)
        cases["engine_change"] = timed_build(folder, cache, bundle)
        sizes = layer_sizes(f"{repository}:{tag_of(folder)}", base)
        remove_images(repository)
        cases["fresh_docker_registry_cache"] = timed_build(
            folder,
            CacheOptions(root=scratch / "engines-2", registry=registry),
            run_bundle(scratch, run, "2"),
        )
    finally:
        remove_images(repository)
        remove_images(f"{repository}-new")
    cold = cases["cold"]["seconds"]
    new = cases["new_model"]["seconds"]
    for case in cases.values():
        case["ratio_of_cold"] = round(case["seconds"] / cold, 4)
        case["ratio_of_new_model"] = round(case["seconds"] / new, 4)
    return {
        "model": model.name,
        "run": run,
        "base_image": base,
        "code_commit": os.environ.get(SNAPSHOT_ENV),
        "machine": {**machine(), "load_avg_at_start": load_at_start},
        "cases": cases,
        "wall_times": wall,
        "image_layers": sizes,
        "registry": registry.address,
    }


def median_case(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median time, with every run's seconds (``runs_s``)."""
    ordered = sorted(runs, key=lambda run: run["seconds"])
    return {**ordered[len(ordered) // 2], "runs_s": [run["seconds"] for run in runs]}


def new_model_build(model: Path, scratch: Path, base: str, bundle: Path) -> dict[str, Any]:
    """A build of a model this run has not built: ``model`` under another name and
    repository, with an engine no build of this run made (``graph_optimization_level:
    basic``: the engine request is name-neutral, so a rename alone would reuse the compile
    step's BuildKit layer), an empty engine cache and no registry: its engine is compiled;
    the same CA bundle: the framework layer is cached."""
    folder = scratch / f"{model.name}-new"
    shutil.copytree(model, folder, ignore=shutil.ignore_patterns(".mmaas"))
    spec = re.sub(r"^name: .*$", f"name: {model.name}-new", (folder / "model.yaml").read_text(),
                  count=1, flags=re.M)  # fmt: skip
    spec = spec.replace(
        "# build:", "build: {onnxruntime: {graph_optimization_level: basic}}\n# build:", 1
    )
    write_spec(folder, spec, f"{NAMESPACE}/{model.name}-new", base)
    return timed_build(folder, CacheOptions(root=scratch / "engines-new"), bundle)


def run_bundle(scratch: Path, run: str, generation: str) -> Path:
    """This generation's CA bundle: the host's (``$MMAAS_CA_BUNDLE``, else the system
    bundle) plus a comment naming the run, so the framework stage and every step after it
    get build-cache keys no other build has (a fresh Docker state), while the engine key,
    which does not count the bundle, stays the same."""
    source = Path(os.environ.get("MMAAS_CA_BUNDLE") or SYSTEM_BUNDLE)
    bundle = scratch / f"ca-bundle-{generation}.pem"
    bundle.write_text(source.read_text() + f"\n# mmaas build benchmark {run}-{generation}\n")
    return bundle


def timed_build(folder: Path, cache: CacheOptions, bundle: Path) -> dict[str, Any]:
    """One ``mmaas build``: seconds, engine-cache outcome and BuildKit step counts."""
    notes: list[str] = []
    output = io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stderr(output):
        result = build_image(folder, cache=cache, ca_bundle=bundle, say=notes.append)
    seconds = round(time.perf_counter() - started, 3)
    text = output.getvalue()
    steps = re.findall(r"^#\d+ (CACHED|DONE)", text, re.MULTILINE)
    print(
        f"  {seconds:8.1f} s  engine cache {result.engine_cache:13s} {'; '.join(notes)[:120]}",
        file=sys.stderr,
    )
    return {
        "seconds": seconds,
        "engine_cache": result.engine_cache,
        "engine_key": result.engine_key,
        "notes": notes,
        "compiled": "mmaas stage: compiling " in text,  # the stage ran (not a cached layer)
        "buildkit_steps": {"cached": steps.count("CACHED"), "ran": steps.count("DONE")},
        "image_id": result.image_id,
    }


def write_spec(folder: Path, spec: str, repository: str, base: str) -> None:
    """The model.yaml of the run: ``spec`` with the run's repository and base image."""
    (folder / "model.yaml").write_text(
        spec + f'image: {{repository: {repository}, base_image: "{base}"}}\n'
    )


def tag_of(folder: Path) -> str:
    """The image tag of the model (its version)."""
    found = re.search(r'^version: "?([^"\s]+)"?', (folder / "model.yaml").read_text(), re.M)
    return found.group(1) if found else "latest"


def machine() -> dict[str, Any]:
    """Where the numbers come from: CPU count, load average, Docker version."""
    return {
        "cpus": os.cpu_count(),
        "load_avg": os.getloadavg(),
        "python": platform.python_version(),
        "docker_server": docker_engine.client().server_version,
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def print_table(result: dict[str, Any]) -> None:
    """The cases as ratios of the cold build and of a new model's, the real command's wall
    times, then the layer groups."""
    print(f"\n{result['model']}: build times (ratio of the cold build, of a new model's)")
    for name, case in result["cases"].items():
        steps = case["buildkit_steps"]
        print(
            f"  {name:28s} {case['seconds']:8.2f} s  {case['ratio_of_cold']:6.1%} "
            f"{case['ratio_of_new_model']:7.1%}  engine cache {case['engine_cache']:12s} "
            f"compiled={case['compiled']!s:5s} steps ran/cached {steps['ran']}/{steps['cached']}"
        )
    print_wall_times(result["wall_times"], result["cases"]["unchanged"], result["machine"])
    print("\nimage size per layer group (MB as Docker counts; gzip MB as a registry stores)")
    for name, sizes in result["image_layers"].items():
        print(f"  {name:20s} {sizes['bytes'] / 1e6:8.1f} MB  {sizes['gzip_bytes'] / 1e6:8.1f} MB")


if __name__ == "__main__":
    main()
