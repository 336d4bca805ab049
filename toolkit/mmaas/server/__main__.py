"""``python -m mmaas.server``: the image's entry point (settings from ``MMAAS_*``)."""

from __future__ import annotations

import sys
from collections.abc import Mapping

from mmaas.core.errors import MmaasError
from mmaas.server.app import serve
from mmaas.server.settings import from_env


def main(environ: Mapping[str, str] | None = None) -> int:
    """Serve until SIGTERM; 0 after a graceful shutdown, 1 when start-up fails (one line
    on stderr naming the problem: never a traceback, never a half-started server)."""
    try:
        serve(from_env(environ))
    except MmaasError as exc:
        print(f"mmaas server: error: {exc}".replace("\n", " "), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
