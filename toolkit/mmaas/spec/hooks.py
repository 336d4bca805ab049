"""What spec load asks of the layers above it: the checks of the back ends (their host parts)
and the pipeline kinds, injected by the caller as one :class:`SpecChecks`.

The spec knows no back end beyond the ``backend:`` names and no pipeline kind beyond the
``pipeline.kind`` names: it parses, validates and completes a model.yaml against its ONNX
graph, and asks these checks, at fixed points of the load, what the chosen back end or kind
refuses. Every verb that loads a model.yaml (validate, render, build, serve, push, export,
init) passes the same composition (:func:`mmaas.build.spec_checks.host_checks`), so a
spec is refused alike everywhere. Each problem is reported at its key like the spec's own
(every problem at once, ``file:line:col: key.path: message``).
"""

from __future__ import annotations

from typing import Protocol

from mmaas.core.errors import SpecProblem
from mmaas.spec.model import ModelSpec
from mmaas.spec.pipeline import PipelineKind
from mmaas.spec.yamlio import KeyPath, YamlDocument


class SpecChecks(Protocol):
    """The checks spec load injects; ``spec`` is always one engine's single-engine view
    (:func:`mmaas.spec.engines.engine_view`) unless said otherwise."""

    def check_precision(self, spec: ModelSpec) -> str | None:
        """Why ``spec``'s back end does not build ``spec.target_precision`` (naming the back
        ends that do), or None; reported at ``target_precision`` before anything else of
        the engine."""
        ...

    def check_datatype(self, spec: ModelSpec, datatype: str) -> str | None:
        """Why ``spec``'s back end cannot carry a tensor of KServe v2 ``datatype`` in or out
        of an engine, or None; reported at the tensor (input or output), after the name."""
        ...

    def check_input(self, spec: ModelSpec, name: str) -> str | None:
        """Why ``spec``'s back end cannot take an input called ``name``, or None; reported
        at the input, after the name."""
        ...

    def check_engine(self, spec: ModelSpec) -> list[tuple[KeyPath, str]]:
        """Settings of the completed ``spec`` its back end cannot build or run together, as
        ``(key path, message)``; asked only of an engine with no other problem."""
        ...

    def check_engines(self, spec: ModelSpec, doc: YamlDocument) -> list[SpecProblem]:
        """Problems across the engines of the whole (validated, not yet completed) ``spec``
        (e.g. one image for every engine), located through ``doc``; ``[]`` for a
        single-engine spec."""
        ...

    def pipeline_kind(self, kind: str) -> PipelineKind:
        """The spec part of pipeline kind ``kind`` (a ``pipeline.kind`` name)."""
        ...
