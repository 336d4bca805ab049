"""The real ``mmaas`` command line in a subprocess, as the docker tests drive it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

MMAAS = Path(sys.executable).parent / "mmaas"  # the console script installed beside this Python


def run_mmaas(
    *args: str,
    cache: Path | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``mmaas ARGS`` with no check on its exit status, stdout and stderr captured as
    text; in ``cwd`` when given, with ``env`` (default: this process's), and with its engine
    cache (``MMAAS_CACHE_DIR``) under ``cache`` when given."""
    if cache is not None:
        env = {**(os.environ if env is None else env), "MMAAS_CACHE_DIR": str(cache)}
    return subprocess.run(
        [str(MMAAS), *args], capture_output=True, text=True, check=False, cwd=cwd, env=env
    )
