"""Fixtures shared by the qwen2-vl tests (the runtime's and the image's): transformers'
reference pipeline on the small checkpoint and the checkpoint's GPU variant, session-scoped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def reference(qwen_vl_export: Path):
    """transformers' tokenizer + PIL image processor + processor + model of the checkpoint."""
    from mmaas.pipelines.qwen2_vl.export.reference import Reference

    return Reference(qwen_vl_export / "checkpoint", num_threads=2)


@pytest.fixture(scope="session")
def qwen_vl_gpu_export(qwen_vl_export: Path) -> Path:
    """``models/qwen-vl-gpu/``: the small checkpoint's GPU variant (fp16 engines, model.yaml
    with the GPU settings), written by ``mmaas convert qwen2-vl --device gpu --precision
    fp16`` when missing or made by other converter code."""
    folder = qwen_vl_export.parent / "qwen-vl-gpu"
    argv = [sys.executable, "-m", "mmaas", "convert", "qwen2-vl", str(folder), "--device", "gpu",
            "--precision", "fp16", "--if-stale"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder
