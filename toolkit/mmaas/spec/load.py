"""Load a model.yaml: parse (YAML with positions), validate (:class:`ModelSpec`), resolve
each engine's ONNX source, cross-check every engine against its ONNX graph and complete
it, check the assets and the pipeline. What the back ends and the pipeline kinds refuse is
asked of the checks the caller injects (:class:`~mmaas.spec.hooks.SpecChecks`).

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from mmaas.core.errors import SourceError, SpecError, SpecProblem, UsageError
from mmaas.core.model_manifest import PipelineRecord
from mmaas.spec.complete import complete_spec
from mmaas.spec.composition import check_engine_batching, check_form, resolve_assets
from mmaas.spec.engines import engine_names, engine_views, model_info, with_engines
from mmaas.spec.errors import data_path, problem_from_error
from mmaas.spec.hooks import SpecChecks
from mmaas.spec.model import ModelSpec
from mmaas.spec.onnx_graph import read_signature
from mmaas.spec.pipeline import check_pipeline, pipeline_record
from mmaas.spec.runtime import RuntimeSpec
from mmaas.spec.sources import resolve_source
from mmaas.spec.yamlio import KeyPath, Position, YamlDocument, load_yaml

SPEC_FILE = "model.yaml"
# Top-level keys the ONNX cross-check reads; errors elsewhere do not block it.
_CROSS_CHECKED = (
    "source",
    "backend",
    "target_precision",
    "max_batch_size",
    "inputs",
    "outputs",
    "engines",
    "assets",
    "pipeline",
)
_CROSS_CHECKED_LOCS = {(key,) for key in _CROSS_CHECKED}
_PLACEHOLDERS = {"name": "placeholder", "version": "0"}


@dataclass(frozen=True)
class EngineSource:
    """One engine of a loaded spec: its name (``model`` for a single-engine spec), its
    completed single-engine view (:func:`mmaas.spec.engines.engine_view`, named as it is
    served) and its local ONNX file (for a URL source, the pin-checked cached download)."""

    name: str
    spec: ModelSpec
    source_path: Path


@dataclass(frozen=True)
class LoadedSpec:
    """A valid, completed model spec and where it came from.

    Attributes:
        spec: the completed spec: in every engine, every graph input with datatype, shape
            (-1 = dynamic) and min/opt/max; the served outputs with datatype and shape.
        path: the model.yaml file.
        model_dir: its folder (sources and assets are relative to it).
        engines: every engine, in model.yaml's order.
        assets: the asset files by name (pin-checked).
        pipeline: the pipeline record (kind, settings, signature), None without one.
        positions: key path (``("inputs", 0, "max")``) -> 1-based (line, column) in ``path``.
    """

    spec: ModelSpec
    path: Path
    model_dir: Path
    engines: tuple[EngineSource, ...]
    positions: Mapping[KeyPath, Position]
    assets: Mapping[str, Path] = field(default_factory=dict)
    pipeline: PipelineRecord | None = None

    @property
    def source_path(self) -> Path:
        """The first engine's ONNX file (the only one of a single-engine spec)."""
        return self.engines[0].source_path

    def engine_folder(self, name: str) -> str:
        """Where engine ``name``'s files go in the model directory: ``.`` when the model is
        one engine and no pipeline (the layout of an engine directory), else the engine's
        name (one folder per engine)."""
        return "." if len(self.engines) == 1 and self.pipeline is None else name


def load_spec(path: Path, *, checks: SpecChecks) -> LoadedSpec:
    """Read, validate, cross-check and complete the model.yaml at ``path`` (a model folder
    stands for its ``model.yaml``), with the back ends' and pipeline kinds' ``checks``
    (:func:`mmaas.build.spec_checks.host_checks`).

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
    return parse_spec(text, path, checks=checks)


def parse_spec(text: str, path: Path, *, checks: SpecChecks) -> LoadedSpec:
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
        loaded = _cross_check(spec, path, doc, checks, problems, frozenset(invalid))
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
    checks: SpecChecks,
    problems: list[SpecProblem],
    invalid: frozenset[KeyPath] = frozenset(),
) -> LoadedSpec | None:
    problems.extend(check_form(spec, doc))
    problems.extend(checks.check_engines(spec, doc))
    if not (spec.engines or spec.source):  # nothing to cross-check
        return None
    model_dir = path.parent
    engines: list[EngineSource] = []
    for name, view in engine_views(spec).items():
        section = doc if spec.engines is None else doc.section(("engines", name))
        if spec.engines is not None:  # batching over several engines is checked below
            view = view.model_copy(update={"runtime": RuntimeSpec()})
        prefix: KeyPath = () if spec.engines is None else ("engines", name)
        mine = frozenset(k[len(prefix) :] for k in invalid if k[: len(prefix)] == prefix)
        done = _engine(view, model_dir, section, checks, problems, mine)
        if done is not None:
            engines.append(EngineSource(name, *done))
    problems.extend(check_engine_batching(spec, doc))
    assets, found = resolve_assets(spec, model_dir, doc)
    problems.extend(found)
    if len(engines) < len(engine_names(spec)) or problems:
        return None
    completed = with_engines(spec, {e.name: e.spec for e in engines})
    views = engine_views(completed)
    signatures = {name: model_info(view) for name, view in views.items()}
    settings, found = check_pipeline(completed, signatures, assets, doc, checks.pipeline_kind)
    problems.extend(found)
    if found:
        return None
    record = (
        None
        if settings is None
        else pipeline_record(completed, settings, signatures, checks.pipeline_kind)
    )
    final = tuple(EngineSource(e.name, views[e.name], e.source_path) for e in engines)
    return LoadedSpec(completed, path, model_dir, final, doc.positions, assets, record)


def _engine(
    view: ModelSpec,
    model_dir: Path,
    doc: YamlDocument,
    checks: SpecChecks,
    problems: list[SpecProblem],
    invalid: frozenset[KeyPath],
) -> tuple[ModelSpec, Path] | None:
    """Resolve one engine's source, read its graph, complete it (problems located in the
    engine's section ``doc``; nothing said under the ``invalid`` key paths, relative to
    it); the completed view and the ONNX file."""
    assert view.source is not None
    given = [key for key in ("path", "url") if getattr(view.source, key) is not None]
    source_key: KeyPath = ("source", *given) if len(given) == 1 else ("source",)
    try:
        source_path = resolve_source(view.source, model_dir)
        graph = read_signature(source_path)
    except SourceError as exc:
        problems.append(doc.problem(source_key, exc.message))
        return None
    completed, found = complete_spec(view, graph, doc, checks, invalid)
    problems.extend(found)
    return None if found else (completed, source_path)
