"""The import layers hold (import-linter's contracts in pyproject.toml): the foundation
imports nothing above it, the server nothing of the build side, the builder stage only
the foundation and the compilers, the back ends no CLI, the spec nothing downstream, and
the gRPC and HTTP front ends import nothing of each other."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from paths import ROOT


def test_import_contracts_are_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "8 kept, 0 broken" in done.stdout, done.stdout[-2000:]
