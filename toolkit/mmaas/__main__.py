"""``python -m mmaas``: the ``mmaas`` command (:func:`mmaas.cli.main`), for a checkout used
without installing it (CI's change detection runs so, with only the ``ci`` extra)."""

from mmaas.cli import main

main()
