"""The helpers of the deploy end-to-end tests: the real CLI in a subprocess, and where the
image holds the model."""

from __future__ import annotations

import subprocess

from mmaas_cli import run_mmaas
from paths import ROOT

MODEL_DIR = "/opt/mmaas/model"


def mmaas(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real CLI in a subprocess."""
    return run_mmaas(*args, cwd=ROOT, env=env)
