"""Fixtures shared by the qwen2-vl tests (the runtime's and the image's): transformers'
reference pipeline on the small checkpoint, session-scoped."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def reference(qwen_vl_export: Path):
    """transformers' tokenizer + PIL image processor + processor + model of the checkpoint."""
    from mmaas.pipelines.qwen2_vl.export.reference import Reference

    return Reference(qwen_vl_export / "checkpoint", num_threads=2)
