"""Fixtures of the gRPC front end's tests: the real server (subprocess) on the PP-OCR
detector and on the direction classifier, one of each per test module."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ..conftest import RunningServer


@pytest.fixture(scope="module")
def det(module_server: Callable[..., RunningServer], det_dir: Path) -> RunningServer:
    """The server on the PP-OCR detector (``ppocr-det``, FP32 ``x`` [-1, 3, -1, -1])."""
    return module_server(det_dir)


@pytest.fixture(scope="module")
def cls(module_server: Callable[..., RunningServer], cls_dir: Path) -> RunningServer:
    """The server on the PP-OCR direction classifier (``ppocr-cls``, batch 1..32)."""
    return module_server(cls_dir)
