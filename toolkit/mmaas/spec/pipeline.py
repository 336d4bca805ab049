"""``pipeline:`` at spec load: the protocol of a kind's spec part (:class:`PipelineKind`),
its settings validated by the kind's own typed model, its cross-checks against the
completed engines and the assets, and the record of the pipeline model (kind, settings,
signature) the build writes into the manifest. The spec imports no kind: the caller
injects the lookup of a kind's spec part (:meth:`mmaas.spec.hooks.SpecChecks.pipeline_kind`,
over the registry :data:`mmaas.core.pipelines.PIPELINES`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from mmaas.core.errors import SpecProblem
from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.core.model_manifest import PipelineRecord
from mmaas.spec.errors import problem_from_error
from mmaas.spec.model import ModelSpec
from mmaas.spec.yamlio import KeyPath, YamlDocument

SETTINGS: KeyPath = ("pipeline", "settings")


@dataclass(frozen=True)
class PipelineSignature:
    """What the pipeline model serves: its inputs (``optional`` allowed) and outputs with
    KServe v2 datatypes, shapes (-1 dynamic) and, for inputs, min/max bounds the request
    path checks; ``max_batch_size`` as Triton's (0: no batch axis)."""

    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    max_batch_size: int = 0


class PipelineKind(Protocol):
    """The spec part of a pipeline kind.

    Attributes:
        settings: the pydantic model of ``pipeline.settings`` (frozen, unknown keys
            forbidden, strict), validated at spec load.
    """

    settings: type[BaseModel]

    def check(
        self, settings: Any, engines: Mapping[str, ModelInfo], assets: Mapping[str, Path]
    ) -> list[tuple[KeyPath, str]]:
        """Cross-check validated ``settings`` against the completed engines' signatures
        (by engine name) and the asset files (by asset name); every problem as (key path
        under ``pipeline.settings``, what is wrong and what to do)."""
        ...

    def signature(self, settings: Any, engines: Mapping[str, ModelInfo]) -> PipelineSignature:
        """The served signature, for settings that passed :meth:`check`."""
        ...


def check_pipeline(
    spec: ModelSpec,
    engines: Mapping[str, ModelInfo],
    assets: Mapping[str, Path],
    doc: YamlDocument,
    kind_of: Callable[[str], PipelineKind],
) -> tuple[BaseModel | None, list[SpecProblem]]:
    """Validate ``spec.pipeline`` (when there is one): ``serve_engines`` names engines, the
    settings are the kind's, and the kind's cross-checks pass (``kind_of(name)``: the spec
    part of kind ``name``). Returns the typed settings (None when invalid or absent) and
    every problem, located in ``doc``."""
    pipeline = spec.pipeline
    if pipeline is None:
        return None, []
    problems = [
        doc.problem(
            ("pipeline", "serve_engines", index),
            f"no engine {name!r}; the engines are: {', '.join(map(repr, engines))}",
        )
        for index, name in enumerate(pipeline.serve_engines or [])
        if name not in engines
    ]
    kind = kind_of(pipeline.kind)
    try:
        settings = kind.settings.model_validate(pipeline.settings)
    except ValidationError as exc:
        section = doc.section(SETTINGS) if SETTINGS in doc.positions else doc
        problems += [problem_from_error(e, section, kind.settings) for e in exc.errors()]
        return None, problems
    problems += [
        doc.problem((*SETTINGS, *path), message)
        for path, message in kind.check(settings, engines, assets)
    ]
    return (None if problems else settings), problems


def pipeline_record(
    spec: ModelSpec,
    settings: BaseModel,
    engines: Mapping[str, ModelInfo],
    kind_of: Callable[[str], PipelineKind],
) -> PipelineRecord:
    """The manifest's record of the pipeline model of a checked ``spec``: kind, settings
    (JSON), its signature (from ``kind_of(kind)``, the kind's spec part) named
    ``spec.name`` at ``spec.version``, the engines served beside it."""
    assert spec.pipeline is not None
    kind = spec.pipeline.kind
    signature = kind_of(kind).signature(settings, engines)
    precisions = {info.precision for info in engines.values()}
    model = ModelInfo(
        name=spec.name,
        version=spec.version,
        backend=kind,
        precision=precisions.pop() if len(precisions) == 1 else "mixed",
        max_batch_size=signature.max_batch_size,
        inputs=signature.inputs,
        outputs=signature.outputs,
    )
    serve = spec.pipeline.serve_engines
    return PipelineRecord(
        kind=kind,
        settings=settings.model_dump(mode="json"),
        model=model,
        serve_engines=tuple(engines if serve is None else serve),
    )
