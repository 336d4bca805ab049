"""Find model folders: every ``models/<name>/model.yaml`` of a repository.

A model folder holds its ``model.yaml`` (and, for local sources, its ONNX file). Commands
take a model as its folder or its model.yaml path.
"""

from __future__ import annotations

from pathlib import Path

from mmaas.core.errors import UsageError
from mmaas.spec.load import SPEC_FILE


def find_models(root: Path) -> list[Path]:
    """Every ``root/models/*/model.yaml``, sorted by path (empty when there is none)."""
    return sorted(path for path in (root / "models").glob(f"*/{SPEC_FILE}") if path.is_file())


def resolve_model(arg: str) -> Path:
    """The model.yaml named by a command-line argument: a model folder or a model.yaml path.

    Raises:
        UsageError: ``arg`` is neither an existing folder holding a model.yaml nor an
            existing model.yaml file.
    """
    path = Path(arg)
    if path.is_dir():
        if (path / SPEC_FILE).is_file():
            return path / SPEC_FILE
        raise UsageError(
            f"{arg}: no {SPEC_FILE} in this folder; create one with "
            f"`mmaas init {arg} --onnx MODEL.onnx`"
        )
    if path.is_file() and path.suffix in (".yaml", ".yml"):
        return path
    if path.is_file():
        raise UsageError(f"{arg}: not a model spec; give a model folder or its {SPEC_FILE}")
    raise UsageError(f"{arg}: no such model folder or {SPEC_FILE}")
