"""Pack everything scripts/gpu_run.sh needs on a GPU host that has Python 3.12 and no
package index, in parts of at most ``--part-mib`` MiB (a host reached in pieces of 64 MiB
per call, the repository's own files included):

* ``site.tar.xz``: the run's dependency set, **resolved by pip** (``pip install --dry-run
  --report``) for cp312 manylinux x86_64 under templates/image-constraints.txt: of mmaas
  (the wheel built from this checkout) with the extras a GPU model is served and compiled
  with (``cli``, ``gpu``, ``fp16``), and of the test clients (pytest,
  ``tritonclient[grpc]`` with its perf_analyzer, cuda-python for
  ``tritonclient.utils.cuda_shared_memory``, the CUDA 12 runtime perf_analyzer loads),
  unpacked with ``pip install --target``. Left out: mmaas itself (in ``repo.tar.xz``),
  what travels another way (onnxruntime-gpu, its own parts: scripts/gpu_ort_parts.sh; the
  CPU onnxruntime it replaces) and what the host's Python already has at a version the
  requirements accept (``--host-freeze``: that Python's ``pip freeze``).
  ``--with`` adds pins to that set (the qwen2-vl run: the converter's transformers).
* ``repo.tar.xz``: the mmaas wheel (protocol stubs and ``mmaas.templates`` included: the
  run installs it), scripts/, tests/, benchmarks/, pyproject.toml, perf_analyzer's libb64,
  of each model the run serves (``--models``: ``NAME`` or ``NAME:ENGINE``) its model.yaml
  and the files it names (``source.path`` of the engine, read with the YAML parser), and
  the files and folders ``--files`` names (repository paths).
* ``ort.tar.xz``: onnxruntime-gpu's tree, joined from ``--ort-parts`` and checked.

The three go into one tar with their SHA256SUMS, split into ``OUT/p0``, ``p1``, ... (one
folder per call). On the host: ``cat p*/carry.tar.part* | tar -xf - -C DIR`` then
``MMAAS_GPU_CARRY=DIR bash scripts/gpu_run.sh OUT`` from DIR/repo (it checks the sums and
unpacks; docs/gpu.md has the calls).

    python scripts/gpu_carry.py OUT --ort-parts .whl/ort-parts [--host-freeze FILE]
        [--with PIN...] [--files PATH...]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")  # fmt: skip
TARGET = ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp",
          *(f"--platform={p}" for p in PLATFORMS)]  # fmt: skip
EXTRAS = ("cli", "gpu", "fp16")
# the dev extra's pins of what the GPU tests import (tests/conftest.py's plugins: bcrypt)
TEST_CLIENTS = ("pytest==9.2.0", "pytest-timeout==2.4.0", "tritonclient[grpc]==2.41.0",
                "setuptools<82", "nvidia-cuda-runtime-cu12==12.9.79", "cuda-python==12.9.0",
                "bcrypt==5.0.0")  # fmt: skip
ELSEWHERE = {"onnxruntime-gpu", "onnxruntime"}  # ort.tar.xz brings the package onnxruntime
LIBB64 = Path("/lib/x86_64-linux-gnu/libb64.so.0d")


def pip(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"pip {args[0]} failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
    return done.stdout


def resolve(
    work: Path, host_freeze: Path | None, extra: list[str]
) -> tuple[Path, list[str], list[str]]:
    """``(the mmaas wheel, pins to carry, pins the host has)``: pip's resolution of
    mmaas[EXTRAS] and the test clients for the target, less mmaas itself, what travels
    elsewhere or is on the host."""
    wheel_dir = work / "wheels"
    pip("wheel", "-q", "--no-deps", "-w", str(wheel_dir), str(ROOT))
    (mmaas,) = wheel_dir.glob("mmaas-*.whl")
    report = work / "report.json"
    pip("install", "-q", "--dry-run", "--ignore-installed", *TARGET, "--target",
        str(work / "unused"), "--report", str(report), "-c",
        str(ROOT / "templates/image-constraints.txt"), "--find-links", str(wheel_dir),
        f"mmaas[{','.join(EXTRAS)}] @ {mmaas.as_uri()}", *TEST_CLIENTS, *extra)  # fmt: skip
    wanted = _requirements(json.loads(report.read_text()))
    have = _freeze(host_freeze)
    carry, present = [], []
    for item in json.loads(report.read_text())["install"]:
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        key = name.lower().replace("_", "-")
        if key in ELSEWHERE or key == "mmaas":
            continue
        if key in have and all(have[key] in r.specifier for r in wanted.get(key, [])):
            present.append(f"{name}=={have[key]}")
        else:
            carry.append(f"{name}=={version}")
    return mmaas, carry, present


def _requirements(report: dict) -> dict[str, list[Requirement]]:
    """Every requirement the resolved set states, by normalized name."""
    found: dict[str, list[Requirement]] = {}
    for item in report["install"]:
        for line in item["metadata"].get("requires_dist", []):
            requirement = Requirement(line)
            found.setdefault(requirement.name.lower().replace("_", "-"), []).append(requirement)
    return found


def _freeze(path: Path | None) -> dict[str, Version]:
    if path is None:
        return {}
    lines = [line.strip() for line in path.read_text().splitlines()]
    pins = (line.split("==") for line in lines if "==" in line and not line.startswith("#"))
    return {name.lower().replace("_", "-"): Version(version) for name, version in pins}


def site(work: Path, pins: list[str], cache: Path) -> Path:
    """The resolved pins unpacked for the target (``pip install --target``), as tar.xz,
    kept in ``cache`` under the pins' digest (xz takes minutes)."""
    digest = hashlib.sha256("\n".join(sorted(pins)).encode()).hexdigest()[:16]
    kept = cache / f"site-{digest}.tar.xz"
    if not kept.is_file():
        target = work / "site"
        pip("install", "-q", "--no-deps", "--no-compile", *TARGET, "--target", str(target), *pins)
        cache.mkdir(parents=True, exist_ok=True)
        shutil.move(_xz(target, work / "site.tar.xz"), kept)
    shutil.copy2(kept, work / "site.tar.xz")
    return work / "site.tar.xz"


def repo(work: Path, mmaas: Path, models: list[str], files: list[str]) -> Path:
    """The mmaas wheel, scripts/, tests/, benchmarks/, pyproject.toml, libb64, the models'
    files and ``files``, as tar.xz."""
    out = work / "repo"
    (out / "wheels").mkdir(parents=True)
    shutil.copy2(mmaas, out / "wheels")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("scripts", "tests", "benchmarks"):
        shutil.copytree(ROOT / folder, out / folder, ignore=ignore)
    shutil.copy2(ROOT / "pyproject.toml", out)
    (out / "lib").mkdir()
    shutil.copy2(LIBB64, out / "lib")
    for entry in models:
        name, _, engine = entry.partition(":")
        source = ROOT / "models" / name
        (out / "models" / name).mkdir(parents=True)
        shutil.copy2(source / "model.yaml", out / "models" / name)
        for file in model_files(yaml.safe_load((source / "model.yaml").read_text()), engine):
            shutil.copy2(source / file, out / "models" / name / file)
    for path in files:
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / path).is_dir():
            shutil.copytree(ROOT / path, out / path, ignore=ignore, dirs_exist_ok=True)
        else:
            shutil.copy2(ROOT / path, out / path)
    return _xz(out, work / "repo.tar.xz")


def model_files(spec: dict, engine: str = "") -> list[str]:
    """The files a model.yaml names: ``source.path`` (single engine) or that of
    ``engines.ENGINE`` (every engine's without ``engine``), and ``assets`` unless one
    engine is asked for."""
    if "engines" not in spec:
        return [spec["source"]["path"]]
    engines = [spec["engines"][engine]] if engine else list(spec["engines"].values())
    files = [e["source"]["path"] for e in engines]
    if not engine:
        files += [a if isinstance(a, str) else a["path"] for a in spec.get("assets", {}).values()]
    return files


def ort(work: Path, parts: Path) -> Path:
    """onnxruntime-gpu's tar.xz joined from its parts, its sha256 checked."""
    joined = work / "ort.tar.xz"
    with joined.open("wb") as sink:
        for part in sorted(parts.glob("p*/ort.tar.xz.part*"), key=lambda p: p.name):
            sink.write(part.read_bytes())
    (expected,) = (parts / "p0/ort.tar.xz.sha256").read_text().split()[:1]
    got = subprocess.run(["sha256sum", str(joined)], capture_output=True, text=True, check=True)
    if got.stdout.split()[0] != expected:
        raise SystemExit(f"{parts}: the joined onnxruntime-gpu archive fails its sha256")
    return joined


def _xz(folder: Path, out: Path) -> Path:
    with out.open("wb") as sink:
        tar = subprocess.Popen(["tar", "-C", str(folder), "-cf", "-", "."], stdout=subprocess.PIPE)
        subprocess.run(["xz", "-T0", "-6"], stdin=tar.stdout, stdout=sink, check=True)
        if tar.wait():
            raise SystemExit(f"tar of {folder} failed")
    return out


def bundle(files: list[Path], out: Path, part_mib: int) -> list[Path]:
    """``files`` and their SHA256SUMS in one tar, split into ``out/pN/carry.tar.partN``."""
    folder = files[0].parent
    sums = subprocess.run(["sha256sum", *(f.name for f in files)], cwd=folder,
                          capture_output=True, text=True, check=True).stdout  # fmt: skip
    (folder / "SHA256SUMS").write_text(sums)
    names = [f.name for f in files] + ["SHA256SUMS"]
    tar = subprocess.Popen(["tar", "-C", str(folder), "-cf", "-", *names], stdout=subprocess.PIPE)
    assert tar.stdout is not None
    parts, index = [], 0
    while chunk := tar.stdout.read(part_mib << 20):
        (out / f"p{index}").mkdir(parents=True)
        parts.append(out / f"p{index}" / f"carry.tar.part{index}")
        parts[-1].write_bytes(chunk)
        index += 1
    if tar.wait():
        raise SystemExit("tar of the bundle failed")
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--ort-parts", type=Path, required=True)
    parser.add_argument("--host-freeze", type=Path)
    parser.add_argument("--models", nargs="+", default=["ppocr-det", "qwen-vl:vision"])
    parser.add_argument("--with", dest="extra", nargs="*", default=[], metavar="PIN")
    parser.add_argument("--files", nargs="*", default=[], metavar="PATH")
    parser.add_argument("--part-mib", type=int, default=60)
    parser.add_argument("--cache", type=Path, default=ROOT / ".cache" / "gpu-carry")
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="mmaas-carry-") as tmp:
        work = Path(tmp)
        mmaas, carry, present = resolve(work, args.host_freeze, args.extra)
        files = [
            site(work, carry, args.cache),
            repo(work, mmaas, args.models, args.files),
            ort(work, args.ort_parts),
        ]
        parts = bundle(files, args.out, args.part_mib)
        (args.out / "carried.txt").write_text("\n".join(["# carried", *carry, "# on the host",
                                                         *present]) + "\n")  # fmt: skip
    sizes = ", ".join(f"{p.parent.name} {p.stat().st_size / 2**20:.1f} MiB" for p in parts)
    print(f"gpu_carry: {len(carry)} distributions carried, {len(present)} on the host; {sizes}")


if __name__ == "__main__":
    main()
