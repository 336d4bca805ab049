"""Load a model.yaml: parse (YAML with positions), validate (:class:`ModelSpec`), resolve the
ONNX source, cross-check against the ONNX graph and complete the spec.

Every problem is collected and raised at once as one :class:`~mmaas.core.errors.SpecError`,
each as ``file:line:col: key.path: what is wrong, what to do``. Validation errors do not
hide the cross-check's problems: an invalid value (a bad profile shape, a wrong type, an
unknown key) is dropped and the rest validated and cross-checked again, and what the
cross-check would say about the dropped value itself is left out (it is reported once);
errors in sections the cross-check does not read (``build``, ``runtime``, ``image``,
``name``...) give way to placeholders. Nothing downstream re-reads the YAML.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from mmaas.core.errors import SourceError, SpecError, SpecProblem, UsageError
from mmaas.spec.complete import complete_spec
from mmaas.spec.errors import data_path, problem_from_error
from mmaas.spec.model import ModelSpec
from mmaas.spec.onnx_graph import read_signature
from mmaas.spec.sources import resolve_source
from mmaas.spec.yamlio import KeyPath, Position, YamlDocument, load_yaml

SPEC_FILE = "model.yaml"
# Top-level keys the ONNX cross-check reads; errors elsewhere do not block it.
_CROSS_CHECKED = ("source", "backend", "target_precision", "max_batch_size", "inputs", "outputs")
_CROSS_CHECKED_LOCS = {(key,) for key in _CROSS_CHECKED}
_PLACEHOLDERS = {"name": "placeholder", "version": "0"}


@dataclass(frozen=True)
class LoadedSpec:
    """A valid, completed model spec and where it came from.

    Attributes:
        spec: the completed spec: every graph input with datatype, shape (-1 = dynamic) and
            min/opt/max; the served outputs with datatype and shape.
        path: the model.yaml file.
        model_dir: its folder (``source.path`` is relative to it).
        source_path: the local ONNX file (for a URL source, the pin-checked cached download).
        positions: key path (``("inputs", 0, "max")``) -> 1-based (line, column) in ``path``.
    """

    spec: ModelSpec
    path: Path
    model_dir: Path
    source_path: Path
    positions: Mapping[KeyPath, Position]


def load_spec(path: Path) -> LoadedSpec:
    """Read, validate, cross-check and complete the model.yaml at ``path`` (a model folder
    stands for its ``model.yaml``).

    Raises:
        UsageError: ``path`` does not exist or is not a readable file.
        SpecError: every problem found in the spec or its ONNX model.
    """
    if path.is_dir():
        path = path / SPEC_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(
            [
                SpecProblem(
                    str(path),
                    "",
                    f"not UTF-8 text ({exc.reason} at byte {exc.start}); save the file as UTF-8",
                )
            ]
        ) from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the model spec ({exc.strerror or exc})") from None
    return parse_spec(text, path)


def parse_spec(text: str, path: Path) -> LoadedSpec:
    """Like :func:`load_spec` for ``text`` that is (or will be written) at ``path``; used to
    check a generated spec before it is written.

    Raises:
        SpecError: every problem found.
    """
    doc = load_yaml(text, str(path))
    if not isinstance(doc.data, dict):
        raise SpecError(
            [
                doc.problem(
                    (),
                    "expected a mapping of keys (name:, version:, source:, "
                    "inputs: ...); the file is empty or holds a list or a value",
                )
            ]
        )
    spec, errors = _validate(doc.data)
    problems = [problem_from_error(error, doc) for error in errors]
    data, invalid = doc.data, set[KeyPath]()
    while spec is None:  # cross-check what is valid: drop each invalid value, validate again
        data, removed = _without_invalid(data, errors)
        if not removed:
            break
        invalid |= removed
        spec, errors = _validate(data)
    if spec is None and not any(error["loc"][:1] in _CROSS_CHECKED_LOCS for error in errors):
        spec, _ = _validate(_cross_checked_part(data))
    loaded = None
    if spec is not None:
        loaded = _cross_check(spec, path, doc, problems, frozenset(invalid))
    if problems or loaded is None:
        raise SpecError(sorted(problems, key=lambda p: (p.line or 0, p.column or 0)))
    return loaded


def _validate(data: dict[str, Any]) -> tuple[ModelSpec | None, list[ErrorDetails]]:
    try:
        return ModelSpec.model_validate(data), []
    except ValidationError as exc:
        return None, exc.errors()


def _without_invalid(
    data: dict[str, Any], errors: list[ErrorDetails]
) -> tuple[dict[str, Any], set[KeyPath]]:
    """A copy of ``data`` without the keys holding the values ``errors`` refuse (a bad
    profile shape, an unknown key, a wrong type), so the ONNX cross-check still runs on the
    rest; and their key paths. A missing key or a bad list entry removes nothing."""
    pruned, removed = copy.deepcopy(data), set[KeyPath]()
    for error in errors:
        key = data_path(error["loc"], data)
        while key and isinstance(key[-1], int):  # a list entry: drop the key holding it
            key = key[:-1]
        parent = _node(pruned, key[:-1])
        if len(key) >= 1 and isinstance(parent, dict) and key[-1] in parent:
            del parent[key[-1]]
            removed.add(key)
    return pruned, removed


def _node(data: Any, key: KeyPath) -> Any:
    for part in key:
        data = data[part]
    return data


def _cross_checked_part(data: dict[str, Any]) -> dict[str, Any]:
    return {**_PLACEHOLDERS, **{key: data[key] for key in _CROSS_CHECKED if key in data}}


def _cross_check(
    spec: ModelSpec,
    path: Path,
    doc: YamlDocument,
    problems: list[SpecProblem],
    invalid: frozenset[KeyPath] = frozenset(),
) -> LoadedSpec | None:
    model_dir = path.parent
    given = [key for key in ("path", "url") if getattr(spec.source, key) is not None]
    source_key: KeyPath = ("source", *given) if len(given) == 1 else ("source",)
    try:
        source_path = resolve_source(spec.source, model_dir)
        graph = read_signature(source_path)
    except SourceError as exc:
        problems.append(doc.problem(source_key, exc.message))
        return None
    completed, found = complete_spec(spec, graph, doc, invalid)
    problems.extend(found)
    return LoadedSpec(completed, path, model_dir, source_path, doc.positions)
