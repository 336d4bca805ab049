"""The house checks: ruff (lint + format) on the whole tree and mypy on the package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
TREES = ["toolkit", "tests", "scripts", "benchmarks"]


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)


def test_ruff_finds_nothing() -> None:
    result = run(str(BIN / "ruff"), "check", *TREES)
    assert result.returncode == 0, result.stdout[-3000:]


def test_ruff_format_is_applied() -> None:
    result = run(str(BIN / "ruff"), "format", "--check", *TREES)
    assert result.returncode == 0, result.stdout[-3000:]


@pytest.mark.slow
def test_mypy_passes_on_the_package() -> None:
    result = run(str(BIN / "mypy"), "toolkit/mmaas")
    assert result.returncode == 0, result.stdout[-3000:]
