"""Writing an export: a folder that appears whole or not at all.

Every file is written into a sibling temp folder that then replaces the target
(:func:`mmaas.core.files.assembled`), so a failure half-way leaves the target as it was. A
target that exists must be empty or an earlier export (it holds :data:`MARKER`, which
records what was exported): a folder of the user's own files is never replaced.

The record is JSON in a file whose name has no ``.json``, ``.yaml`` or ``.yml`` ending:
``kubectl apply -f DIR`` reads every file of a folder with one of those endings as a
Kubernetes object, and Triton reads only ``config.pbtxt`` and the version folders of a
model's folder, so neither takes the record for one of its own files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from mmaas.core.errors import UsageError
from mmaas.core.files import assembled, atomic_write_text, link_or_copy

MARKER = ".mmaas-export"


class _Dumper(yaml.SafeDumper):
    """Safe YAML without anchors/aliases (a repeated value is written out again, as
    kubectl users expect) and with multi-line strings (PEM keys) as literal blocks."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _text(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _text)


def to_yaml(document: Mapping[str, Any]) -> str:
    """One Kubernetes object as YAML (keys in the order built, block style)."""
    return yaml.dump(dict(document), Dumper=_Dumper, sort_keys=False, default_flow_style=False)


def check_target(out_dir: Path) -> None:
    """Raise UsageError unless ``out_dir`` is absent, an empty folder or an earlier export."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"{out_dir} is a file, not a folder", hint="give a folder to write into")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not (out_dir / MARKER).is_file():
        raise UsageError(
            f"{out_dir} holds files mmaas did not export; refusing to replace them",
            hint="give a new or empty folder (an earlier export's folder is replaced whole)",
        )


def write_folder(out_dir: Path, files: Mapping[str, str | Path], record: Mapping[str, Any]) -> None:
    """Make ``out_dir`` hold exactly ``files`` (relative path -> text, or a host file that
    is hard-linked or copied) and :data:`MARKER` with ``record`` (JSON).

    Raises:
        UsageError: ``out_dir`` holds other files (:func:`check_target`).
    """
    check_target(out_dir)
    with assembled(out_dir) as work:
        for name, content in files.items():
            target = work / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, Path):
                link_or_copy(content, target)
            else:
                atomic_write_text(target, content)
        atomic_write_text(work / MARKER, json.dumps(dict(record), indent=2, sort_keys=True) + "\n")
