"""Fetch the example ONNX models (and with ``--all`` the test models and the qwen-vl test
pictures) from pinned PyPI wheels, and check every sha256.

The PP-OCR models ship inside ``rapidocr-onnxruntime==1.4.4`` (see shared MODELS.md). The
test models are production models whose quirks the tests need (:data:`TEST_MODELS`:
ddddocr's ``common.onnx`` declares its output ``[1, seqlen]`` but returns ``[T, 1, 8210]``;
silero-vad's rank-0 ``sr`` input must be 8000 or 16000); they go into
``.cache/test-models/<name>/`` (git-ignored). The real photographs the qwen-vl tests and
benchmark use ship inside ``matplotlib==3.11.2`` (``mpl-data/sample_data``) and
``scikit-image==0.26.0`` (``skimage/data``); they go into ``models/qwen-vl/pictures/``
(git-ignored).
The wheel is downloaded once with ``pip download`` into a cache folder, checked against
its sha256, and each ``.onnx`` is extracted (temp file + rename) into its model folder
and checked against its own sha256. Nothing is committed: ``models/*/*.onnx`` is ignored.

Usage: ``python scripts/fetch_models.py [--all] [--dest models] [--cache .cache/wheels]``
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

# test model folder -> (requirement, wheel file, its sha256, member inside it, its sha256)
TEST_MODELS = {
    "ddddocr": (
        "ddddocr==1.6.1",
        "ddddocr-1.6.1-py3-none-any.whl",
        "c7c70f4ae2d0335440ae8b272eea48c9f6888ecef46785fe2311f0c97a133935",
        "ddddocr/common.onnx",
        "33b5cd351ee94e73a6bf8fa18c415ed8b819b3ffd342e267c30d8ad8334e34e8",
    ),
    "silero-vad": (
        "silero-vad==6.2.3",
        "silero_vad-6.2.3-py3-none-any.whl",
        "7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8",
        "silero_vad/data/silero_vad.onnx",
        "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3",
    ),
}
TEST_MODELS_DIR = ROOT / ".cache" / "test-models"

# (requirement, wheel file, its sha256, folder inside it, {picture: sha256}); the cp311
# manylinux wheels (the pictures are the same in every platform's wheel).
PICTURE_WHEELS = (
    (
        "matplotlib==3.11.2",
        "matplotlib-3.11.2-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        "07d9b9fa60cd4c393692f50d0bb03123242ddf61c99bb0e95e75feb354e7c1a8",
        "matplotlib/mpl-data/sample_data",
        {
            "grace_hopper.jpg": "a8ca6d734765703b09728ab47fe59f473d93ae3967fc24c7c0288c3c7adb7130",
            "logo2.png": "0d7371e055decaac47cb6e809af3442e9c1ecd02f1c1e2d063d1cfee4b4a21d7",
        },
    ),
    (
        "scikit-image==0.26.0",
        "scikit_image-0.26.0-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
        "74aa5518ccea28121f57a95374581d3b979839adc25bb03f289b1bc9b99c58af",
        "skimage/data",
        {
            "rocket.jpg": "c2dd0de7c538df8d111e479619b129464d0269d0ae5fd18ca91d33a7fdfea95c",
            "astronaut.png": "88431cd9653ccd539741b555fb0a46b61558b301d4110412b5bc28b5e3ea6cb5",
            "coffee.png": "cc02f8ca188b167c775a7101b5d767d1e71792cf762c33d6fa15a4599b5a8de7",
            "camera.png": "b0793d2adda0fa6ae899c03989482bff9a42d3d5690fc7e3648f2795d730c23a",
            "logo.png": "f2c57fe8af089f08b5ba523d95573c26e62904ac5967f4c8851b27d033690168",
        },
    ),
)


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_wheel(
    cache: Path, package: str = PACKAGE, name: str = WHEEL, pin: str = WHEEL_SHA256
) -> Path:
    """Return the checked wheel ``name`` in ``cache``, downloading ``package`` with pip
    (``--no-deps``, binary only) when absent.

    Raises:
        SystemExit: pip fails or the wheel's sha256 differs from the pin.
    """
    wheel = cache / name
    if not wheel.is_file() or sha256_of(wheel) != pin:
        cache.mkdir(parents=True, exist_ok=True)
        argv = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--quiet",
            "--only-binary=:all:",
            "--dest",
            str(cache),
            package,
        ]
        if subprocess.run(argv, check=False).returncode != 0:
            sys.exit(f"fetch_models: `{' '.join(argv)}` failed; is PyPI reachable?")
    if not wheel.is_file():
        sys.exit(f"fetch_models: pip download {package} gave no {name}")
    actual = sha256_of(wheel)
    if actual != pin:
        sys.exit(f"fetch_models: {wheel}: sha256 {actual}, expected {pin}")
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


def fetch_test_models(dest: Path, cache: Path) -> dict[str, Path]:
    """Fetch every test model (skipping those present and checked); return ``{name: path of
    its .onnx}`` (``dest/<name>/<file>``)."""
    paths = {}
    for folder, (package, name, pin, member, expected) in TEST_MODELS.items():
        target = dest / folder / Path(member).name
        if not (target.is_file() and sha256_of(target) == expected):
            extract(fetch_wheel(cache, package, name, pin), member, expected, target)
        paths[folder] = target
    return paths


def fetch_pictures(dest: Path, cache: Path) -> list[Path]:
    """Fetch the qwen-vl pictures into ``dest`` (skipping wheels whose pictures are all
    present and checked); return their paths."""
    paths = []
    for package, name, pin, folder, pictures in PICTURE_WHEELS:
        targets = {picture: dest / picture for picture in pictures}
        if not all(t.is_file() and sha256_of(t) == pictures[p] for p, t in targets.items()):
            wheel = fetch_wheel(cache, package, name, pin)
            for picture, target in targets.items():
                extract(wheel, f"{folder}/{picture}", pictures[picture], target)
        paths += targets.values()
    return paths


def main() -> None:
    """Command-line entry: fetch into ``--dest`` (default ``models/``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=ROOT / "models")
    parser.add_argument("--cache", type=Path, default=ROOT / ".cache" / "wheels")
    parser.add_argument(
        "--all", action="store_true", help="also the test models and the qwen-vl pictures"
    )
    args = parser.parse_args()
    found = fetch_all(args.dest, args.cache)
    if args.all:
        found |= fetch_test_models(TEST_MODELS_DIR, args.cache)
    for folder, path in found.items():
        print(f"{folder}: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    if not args.all:
        return
    pictures = fetch_pictures(args.dest / "qwen-vl" / "pictures", args.cache)
    print(f"qwen-vl pictures: {', '.join(p.name for p in pictures)}")


if __name__ == "__main__":
    main()
