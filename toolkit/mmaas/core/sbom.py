"""The runtime image's SBOM: CycloneDX (JSON, spec 1.6) of the server interpreter's
environment, made at build time by CycloneDX's own generator (PyPI ``cyclonedx-bom``,
``cyclonedx-py environment``) from the interpreter that serves, so it lists what is
installed, not what a requirements file asked for (``--no-deps`` installs and wheels
built elsewhere included, C33).

``python -m mmaas.core.sbom OUT TOOL`` (run by the runtime image's ``sbom`` stage with the
server's interpreter; TOOL is ``cyclonedx-py`` from a venv of its own that never reaches
the runtime image) writes OUT, adds what the generator cannot know (the interpreter
itself as a ``platform`` component, and the scope: the operating-system packages of the
base image are out of it), and fails the build when a distribution the interpreter can
import is missing from the SBOM or listed with another version (:func:`missing`). The
runtime image carries the file at :data:`SBOM_PATH`, named by the label
``io.mmaas.sbom``.
"""

from __future__ import annotations

import json
import platform
import re
import sys
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from mmaas.core import proc
from mmaas.core.errors import ProcessError
from mmaas.core.files import atomic_write_text

SBOM_PATH = "/opt/mmaas/sbom.cdx.json"
SBOM_LABEL = "io.mmaas.sbom"
SPEC_VERSION = "1.6"
SCOPE = "the Python distributions importable by the server's interpreter ({prefix})"
OUT_OF_SCOPE = (
    "the base image's operating-system packages (dpkg), among them the python3 "
    "interpreter's own files and the shared libraries it loads: inventory them with a "
    "system-level SBOM tool over the base image"
)


def installed() -> dict[str, str]:
    """``{normalized name: version}`` of every distribution on ``sys.path``, as
    ``importlib.metadata`` finds them (names per PEP 503)."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(_normalized(name), dist.version)
    return found


def listed(sbom: Mapping[str, Any]) -> dict[str, str]:
    """``{normalized name: version}`` of the SBOM's Python distributions: its ``library``
    and ``application`` components (a distribution installed from a local wheel, such as
    mmaas itself, has no ``pkg:pypi`` purl: it did not come from PyPI)."""
    found: dict[str, str] = {}
    for component in sbom.get("components", []):
        if component.get("type") in ("library", "application"):
            found[_normalized(component["name"])] = str(component.get("version", ""))
    return found


def missing(sbom: Mapping[str, Any], distributions: Mapping[str, str]) -> list[str]:
    """The ``name==version`` of each of ``distributions`` that ``sbom`` lacks or lists with
    another version (sorted); empty when it covers them all."""
    components = listed(sbom)
    return sorted(
        f"{name}=={version}"
        for name, version in distributions.items()
        if components.get(name) != version
    )


def annotate(sbom: dict[str, Any]) -> dict[str, Any]:
    """``sbom`` with the interpreter as a ``platform`` component and the scope recorded as
    ``metadata.properties`` (``mmaas:sbom:scope``, ``mmaas:sbom:out-of-scope``)."""
    interpreter = {
        "type": "platform",
        "bom-ref": "mmaas:interpreter",
        "name": platform.python_implementation().lower(),
        "version": platform.python_version(),
        "description": f"the server's interpreter, {sys.executable} (from the base image)",
    }
    meta = sbom.setdefault("metadata", {})
    meta["properties"] = [
        *meta.get("properties", []),
        {"name": "mmaas:sbom:scope", "value": SCOPE.format(prefix=sys.prefix)},
        {"name": "mmaas:sbom:out-of-scope", "value": OUT_OF_SCOPE},
    ]
    sbom["components"] = [*sbom.get("components", []), interpreter]
    return sbom


def generate(out: Path, tool: str) -> dict[str, Any]:
    """Run ``TOOL environment`` on this interpreter, annotate the result, check that it
    lists every installed distribution, and write it to ``out`` atomically.

    Raises:
        ProcessError: the generator failed. ValueError: it printed no JSON, or a
            distribution of this interpreter is missing from it (naming each).
    """
    argv = [tool, "environment", "--of", "JSON", "--sv", SPEC_VERSION, "--output-reproducible"]
    done = proc.run([*argv, "-o", "-", sys.executable], what="cyclonedx-py environment")
    sbom = annotate(json.loads(done.stdout))
    absent = missing(sbom, installed())
    if absent:
        raise ValueError(f"the SBOM lacks installed distributions: {', '.join(absent)}")
    atomic_write_text(out, json.dumps(sbom, indent=2, sort_keys=True) + "\n")
    return sbom


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()  # PEP 503


def main(argv: list[str]) -> int:
    """``python -m mmaas.core.sbom OUT TOOL``: 0 and one line with the component count, 1
    and the problem, 2 for a usage error."""
    if len(argv) != 2:
        print("usage: python -m mmaas.core.sbom OUT CYCLONEDX_PY", file=sys.stderr)
        return 2
    try:
        sbom = generate(Path(argv[0]), argv[1])
    except (ProcessError, ValueError) as exc:
        print(f"mmaas: error: SBOM: {exc}", file=sys.stderr)
        return 1
    print(f"SBOM: {len(sbom['components'])} components -> {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
