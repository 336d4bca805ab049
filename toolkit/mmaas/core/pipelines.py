"""Pipeline kinds: how a ``pipeline:`` composes a model's engines into one served model
(Triton's ensembles are the peer), registered in one literal dict as back ends are.

Each kind is one package under :mod:`mmaas.pipelines` whose parts are named here, each as
``"module:attribute"`` and imported only when asked for:

* **spec** (:class:`mmaas.spec.pipeline.PipelineKind`, host side: validate, render,
  build): the kind's typed settings, its cross-checks against the engines and assets,
  and the signature of the model it serves;
* **runtime** (:class:`mmaas.server.pipeline.PipelineRuntime`, in the server): the
  executor that answers the pipeline model's requests from the loaded engines;
* **convert** (optional, host side, ``mmaas convert KIND``): makes a model directory of
  this kind from a checkpoint (its ``convert`` method; see the kind's converter);
* **engine_check** (optional, in the server): ``check_for(info) -> check | None``, the
  request check of one of its engines recognised by its signature, run before that
  engine's batcher wherever the engine is served: inside its pipeline's model, as
  ``<name>-<engine>``, or as a model of its own (e.g. qwen2-vl's vision grid rule).

So the runtime image carries the runtime parts only (``runtime_modules``: the server
reaches them through this registry, so an image wheel holding the server packs them:
:mod:`mmaas.build.wheel`), the spec parts stay on the host, and only the convert verb
imports a convert part (torch, transformers). Adding a kind is its package plus one entry
here and its name in :data:`PipelineName`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Literal

from mmaas.core.errors import UsageError

# The kinds ``pipeline.kind`` accepts (the spec's Literal; tests check it equals the
# registry's names).
PipelineName = Literal["ensemble", "qwen2-vl"]


@dataclass(frozen=True)
class PipelineParts:
    """Where one kind's parts live, each as ``"module:attribute"`` (``convert`` None: the
    kind has no converter); ``runtime_modules``, the dotted names of the modules and
    packages the runtime part imports of its kind, which image wheels pack; and the
    distributions its runtime part imports beyond the server's (``runtime_packages``:
    installed into the images of models of this kind only, pinned by
    templates/image-constraints.txt, without their dependencies: e.g. ``tokenizers``
    declares huggingface-hub, which only its downloads use)."""

    spec: str
    runtime: str
    runtime_modules: tuple[str, ...]
    runtime_packages: tuple[str, ...] = ()
    convert: str | None = None
    engine_check: str | None = None


PIPELINES: dict[str, PipelineParts] = {
    "ensemble": PipelineParts(
        "mmaas.pipelines.ensemble.spec:EnsembleKind",
        "mmaas.pipelines.ensemble.runtime:EnsembleRuntime",
        runtime_modules=("mmaas.pipelines.ensemble.runtime",),
    ),
    "qwen2-vl": PipelineParts(
        "mmaas.pipelines.qwen2_vl.spec:Qwen2VLKind",
        "mmaas.pipelines.qwen2_vl.runtime.pipeline:Qwen2VLRuntime",
        runtime_modules=("mmaas.pipelines.qwen2_vl.runtime", "mmaas.pipelines.qwen2_vl.config"),
        # httpx and what it imports: the OpenAI front end's picture fetching
        runtime_packages=("pillow", "tokenizers", "httpx", "httpcore", "h11", "certifi"),
        convert="mmaas.pipelines.qwen2_vl.convert.converter:Qwen2VLConverter",
        engine_check="mmaas.pipelines.qwen2_vl.runtime.vision_check:check_for",
    ),
}


def load_part(kind: str, part: str) -> Any:
    """An instance of ``kind``'s ``part`` (``"spec"``, ``"runtime"`` or ``"convert"``).

    Raises:
        UsageError: an unknown kind (a manifest from another mmaas), listing the known; a
            kind without a converter, listing those with one.
    """
    parts = PIPELINES.get(kind)
    if parts is None:
        raise UsageError(
            f"unknown pipeline kind {kind!r}; this mmaas knows: {', '.join(sorted(PIPELINES))}"
        )
    where = getattr(parts, part)
    if where is None:
        having = ", ".join(sorted(k for k, p in PIPELINES.items() if getattr(p, part)))
        raise UsageError(f"pipeline kind {kind!r} has no {part} part; kinds with one: {having}")
    module, _, attribute = str(where).partition(":")
    return getattr(importlib.import_module(module), attribute)()


def engine_checks() -> list[Any]:
    """Every kind's ``engine_check`` function (``check_for(info) -> check | None``)."""
    found = []
    for parts in PIPELINES.values():
        if parts.engine_check is not None:
            module, _, attribute = parts.engine_check.partition(":")
            found.append(getattr(importlib.import_module(module), attribute))
    return found
