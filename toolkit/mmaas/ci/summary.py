"""The Markdown table a CI build job writes to its job summary (``$GITHUB_STEP_SUMMARY``).

Columns: model, back end, engine hash (``blake3:<hex>``), image digest (the pushed
``repository@sha256:<hex>``, or the local image id when the job does not push), build
time in seconds. Inputs are the JSON printed by ``mmaas build --json`` (keys ``image``,
``image_id``, ``engine.blake3``, ``seconds``) and ``mmaas push --json`` (``reference``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mmaas.core.errors import UsageError

HEADER = (
    "| model | backend | engine hash | image digest | build time |\n"
    "| --- | --- | --- | --- | --- |\n"
)


def summary_table(model: str, backend: str, build_json: Path, push_json: Path | None) -> str:
    """The header and one row for ``model``.

    Raises:
        UsageError: a JSON file is unreadable or lacks a field named above.
    """
    build = _read(build_json)
    pushed = _read(push_json) if push_json is not None and push_json.is_file() else None
    try:
        engine = build["engine"]["blake3"]
        seconds = float(build["seconds"])
        image = (
            f"`{pushed['reference']}`"
            if pushed
            else f"not pushed (local `{build['image']}` {build['image_id']})"
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(
            f"build/push JSON lacks the field {exc}",
            hint="pass the outputs of `mmaas build --json` and `mmaas push --json`",
        ) from exc
    return HEADER + f"| {model} | {backend} | `{engine}` | {image} | {seconds:.1f} s |\n"


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: cannot read JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise UsageError(f"{path}: not a JSON object")
    return data
