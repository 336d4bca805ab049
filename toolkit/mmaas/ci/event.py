"""What change detection needs from a GitHub Actions event payload (``$GITHUB_EVENT_PATH``).

Fields read (GitHub webhook payloads, "push" and "pull_request" events):
``before``/``after``/``ref``/``deleted`` of a push, ``pull_request.base.sha`` of a pull
request, and ``repository.default_branch`` of both. act sends thin events that may lack
any of them (nektos/act#454, C22): a missing field is None, never an error, and
:func:`mmaas.ci.changes.changed_models` builds every model when the base is unknown.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmaas.core.errors import UsageError


@dataclass(frozen=True)
class EventRefs:
    """The commits and refs one event names (None where the payload has no such field).

    Attributes:
        base: push ``before`` (forty zeros for a new branch) or pull request base sha.
        head: push ``after``; None for pull requests, whose checkout (``HEAD``, the merge
            commit) is what gets built.
        ref: the pushed ref, e.g. ``refs/heads/main``.
        default_branch: ``repository.default_branch``.
        deleted: True for the push that deletes a branch (nothing to build).
    """

    base: str | None = None
    head: str | None = None
    ref: str | None = None
    default_branch: str | None = None
    deleted: bool = False


def read_event(path: Path) -> EventRefs:
    """Parse the event JSON at ``path``.

    Raises:
        UsageError: the file cannot be read or is not a JSON object.
    """
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"{path}: cannot read the event JSON ({exc})",
            hint="pass the file GitHub names in $GITHUB_EVENT_PATH",
        ) from exc
    if not isinstance(data, dict):
        raise UsageError(f"{path}: the event is not a JSON object")
    return event_refs(data)


def event_refs(data: dict[str, Any]) -> EventRefs:
    """The :class:`EventRefs` of a parsed event payload (push or pull_request)."""
    pull = _mapping(data.get("pull_request"))
    repository = _mapping(data.get("repository"))
    base = _text(_mapping(pull.get("base")).get("sha")) if pull else _text(data.get("before"))
    return EventRefs(
        base=base,
        head=None if pull else _text(data.get("after")),
        ref=_text(data.get("ref")),
        default_branch=_text(repository.get("default_branch")),
        deleted=data.get("deleted") is True,
    )


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
