"""The checks every verb injects into spec load (:class:`mmaas.spec.hooks.SpecChecks`), wired
once: each engine's back end through its host part (:class:`~mmaas.backends.targets.
BuildTarget`: the precisions it builds, the datatypes and input names it takes, the
settings it can build together), the rules across back ends, and the pipeline kinds'
spec parts (:data:`mmaas.core.pipelines.PIPELINES`).

Rules across back ends:

* a precision the engine's back end does not build names the back ends that build it;
* the engines of one model share one image: one back end and one image recipe (ONNX
  Runtime: the same ``build.onnxruntime.device``), since the runtime stage installs one
  back end's runtime; an engine that differs from the first is reported at its
  ``backend`` (or ``build``) key, or at the engine when that key is not written.
"""

from __future__ import annotations

from typing import cast

from mmaas.backends import BACKENDS, get_target
from mmaas.core.errors import SpecProblem
from mmaas.core.pipelines import load_part
from mmaas.spec.engines import engine_views
from mmaas.spec.hooks import SpecChecks
from mmaas.spec.model import ModelSpec
from mmaas.spec.pipeline import PipelineKind
from mmaas.spec.yamlio import KeyPath, YamlDocument


def host_checks() -> SpecChecks:
    """The checks of every registered back end and pipeline kind, as spec load takes them
    (``load_spec(path, checks=host_checks())``)."""
    return HostChecks()


def pipeline_kind(kind: str) -> PipelineKind:
    """The spec part of pipeline kind ``kind``.

    Raises:
        UsageError: an unknown kind (lists the known ones).
    """
    return cast(PipelineKind, load_part(kind, "spec"))


class HostChecks:
    """:class:`~mmaas.spec.hooks.SpecChecks` over the back-end registry
    (:data:`mmaas.backends.BACKENDS`) and the pipeline kinds; see the module docstring."""

    def check_precision(self, spec: ModelSpec) -> str | None:
        """``backend X does not build P engines; it supports: ... (P needs backend: ...)``
        when ``spec.target_precision`` is not one of the back end's precisions."""
        backend, precision = spec.backend, spec.target_precision
        supported = get_target(backend).precisions
        if precision in supported:
            return None
        others = [name for name in BACKENDS if precision in get_target(name).precisions]
        return (
            f"backend {backend} does not build {precision} "
            f"engines; it supports: {', '.join(supported)} ({precision} needs "
            f"backend: {' or '.join(others)})"
        )

    def check_datatype(self, spec: ModelSpec, datatype: str) -> str | None:
        """The back end's :meth:`~mmaas.backends.targets.BuildTarget.check_datatype`."""
        return get_target(spec.backend).check_datatype(spec, datatype)

    def check_input(self, spec: ModelSpec, name: str) -> str | None:
        """The back end's :meth:`~mmaas.backends.targets.BuildTarget.check_input`."""
        return get_target(spec.backend).check_input(name)

    def check_engine(self, spec: ModelSpec) -> list[tuple[KeyPath, str]]:
        """The back end's :meth:`~mmaas.backends.targets.BuildTarget.check_spec`."""
        return get_target(spec.backend).check_spec(spec)

    def check_engines(self, spec: ModelSpec, doc: YamlDocument) -> list[SpecProblem]:
        """Engines whose back end or image recipe differs from the first engine's (see the
        module docstring)."""
        if not spec.engines:
            return []
        views = engine_views(spec)
        first, *others = views
        backend = views[first].backend
        recipe = get_target(backend).recipe(views[first])
        problems: list[SpecProblem] = []
        for name in others:
            view, section = views[name], doc.data.get("engines", {}).get(name, {})
            if view.backend != backend:
                what, key = f"back end {view.backend} (engine {first!r}: {backend})", "backend"
            elif get_target(backend).recipe(view) != recipe:
                mine = get_target(backend).recipe(view).template
                what, key = f"image template {mine} (engine {first!r}: {recipe.template})", "build"
            else:
                continue
            where = ("engines", name, key) if key in section else ("engines", name)
            problems.append(
                doc.problem(
                    where,
                    f"engine {name!r} needs {what}, and one image holds one back end's "
                    "runtime; give every engine the same backend and device "
                    "(build.onnxruntime.device)",
                )
            )
        return problems

    def pipeline_kind(self, kind: str) -> PipelineKind:
        """:func:`pipeline_kind`."""
        return pipeline_kind(kind)
