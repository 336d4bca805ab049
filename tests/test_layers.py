"""The import layers hold (import-linter's contracts in pyproject.toml), with no exemptions:
each package imports only those below it (cli > ci | export | bench > build > the back
ends' host parts > their protocol > spec > stage | server > the back ends' builder parts >
their runtime parts > core; a pipeline kind beside the host parts), the back-end registry
only the foundation, the spec, the builder stage and the server reach a back end only
through the registry, the gRPC and HTTP front ends import nothing of each other, and each
pipeline kind's parts are layered (converter > export > spec | runtime > config) with its
runtime part free of the host side."""

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
    assert "7 kept, 0 broken" in done.stdout, done.stdout[-2000:]
