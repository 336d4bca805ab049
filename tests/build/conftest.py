"""Fixtures of the build tests: the loaded spec of models/ppocr-det, checked with the
host's back-end and pipeline-kind checks as ``mmaas build`` checks it."""

from __future__ import annotations

from pathlib import Path

import pytest

from mmaas.build.spec_checks import host_checks
from mmaas.spec.load import load_spec
from paths import ROOT


@pytest.fixture
def det(ppocr_models: dict[str, Path]):
    """models/ppocr-det loaded (its ONNX file fetched by ``ppocr_models`` first)."""
    return load_spec(ROOT / "models" / "ppocr-det", checks=host_checks())
