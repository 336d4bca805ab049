"""The package data of ``mmaas.templates`` (the Dockerfile templates, the image constraints,
the SBOM tool's pin) as text, and the versions the image constraints pin.

Read on the host only (``mmaas render`` and ``build``, and the back ends' host parts for
the versions their images are labelled with); no image carries the templates.
"""

from __future__ import annotations

import re
from importlib import resources

CONSTRAINTS = "image-constraints.txt"  # the pins every image installs under


def template_file(name: str) -> str:
    """The text of ``templates/<name>`` (package data of ``mmaas.templates``).

    Raises:
        FileNotFoundError: no such file.
    """
    return resources.files("mmaas.templates").joinpath(name).read_text()


def constraints_text() -> str:
    """The pins every image installs under (``templates/image-constraints.txt``)."""
    return template_file(CONSTRAINTS)


def pinned_version(package: str) -> str | None:
    """The version ``package`` is pinned to (``name==version``) in the image constraints,
    or None when it is not pinned there."""
    found = re.search(rf"^{re.escape(package)}==(\S+)\s*$", constraints_text(), re.MULTILINE)
    return found.group(1) if found else None
