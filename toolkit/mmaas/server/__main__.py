"""``python -m mmaas.server``: the image's entry point (settings from ``MMAAS_*``)."""

from __future__ import annotations

import sys
from collections.abc import Mapping

from mmaas.core.errors import MmaasError
from mmaas.server.logs import configure
from mmaas.server.settings import from_env
from mmaas.server.startup import begin


def main(environ: Mapping[str, str] | None = None) -> int:
    """Serve until SIGTERM; 0 after a graceful shutdown, 1 when start-up fails (one line
    on stderr naming the problem: never a traceback, never a half-started server). The
    model's bring-up starts before the front ends are imported (:mod:`.startup`)."""
    try:
        settings = from_env(environ)
        configure(settings.log_format, settings.log_level)
        started = begin(settings)
        started.wait_imported()
        from mmaas.server.app import serve  # the front ends load while the engine does

        serve(settings, started)
    except MmaasError as exc:
        print(f"mmaas server: error: {exc}".replace("\n", " "), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
