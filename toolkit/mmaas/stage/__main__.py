"""``python -m mmaas.stage``: the builder stage's command line (see :mod:`mmaas.stage.build`)."""

from __future__ import annotations

import sys

from mmaas.stage.build import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
