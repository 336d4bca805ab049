"""Print the requirements of mmaas's base distribution and of the named extras, one a line,
from ``pyproject.toml`` (the one place pins live), with ``mmaas[...]`` references expanded.

For installing what a verb needs without building mmaas itself (setup.py's protocol stubs
need grpcio-tools and tritonclient): CI's change detection installs ``ci`` this way and
runs ``python -m mmaas`` from the checkout (.github/actions/setup-mmaas).

Usage: ``python scripts/extra_requirements.py EXTRA [EXTRA ...] > requirements.txt``
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import tomllib

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def requirements(extras: Sequence[str], pyproject: Path = PYPROJECT) -> list[str]:
    """The base dependencies, then each extra's, expanded and without repeats.

    Raises:
        KeyError: an extra the project does not define.
    """
    project = tomllib.loads(pyproject.read_text())["project"]
    found = [*project["dependencies"], *_expand(extras, project["optional-dependencies"])]
    return list(dict.fromkeys(found))


def _expand(extras: Sequence[str], table: Mapping[str, Sequence[str]]) -> Iterator[str]:
    for extra in extras:
        for line in table[extra]:
            if line.startswith("mmaas["):
                yield from _expand(line[len("mmaas[") : -1].split(","), table)
            else:
                yield line


if __name__ == "__main__":
    print("\n".join(requirements(sys.argv[1:])))
