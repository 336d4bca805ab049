"""Pipeline kinds: how a ``pipeline:`` composes a model's engines into one served model
(Triton's ensembles are the peer), registered in one literal dict as back ends are.

Each kind has two parts, each ``"module:attribute"``, imported only when asked for:

* **spec** (:class:`mmaas.spec.pipeline.PipelineKind`, host side: validate, render,
  build): the kind's typed settings, its cross-checks against the engines and assets,
  and the signature of the model it serves;
* **runtime** (:class:`mmaas.server.pipeline.PipelineRuntime`, in the server): the
  executor that answers the pipeline model's requests from the loaded engines.

So the runtime image carries the runtime part only (it lives under ``mmaas.server``) and
the spec part stays on the host (under ``mmaas.spec``). Adding a kind is its two modules
plus one entry here and its name in :data:`PipelineName`.
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
    """Where one kind's parts live, each as ``"module:attribute"``, and the distributions
    its runtime part imports beyond the server's (``runtime_packages``: installed into the
    images of models of this kind only, pinned by templates/image-constraints.txt, without
    their dependencies: e.g. ``tokenizers`` declares huggingface-hub, which only its
    downloads use)."""

    spec: str
    runtime: str
    runtime_packages: tuple[str, ...] = ()


PIPELINES: dict[str, PipelineParts] = {
    "ensemble": PipelineParts(
        "mmaas.spec.pipelines.ensemble:EnsembleKind",
        "mmaas.server.pipelines.ensemble:EnsembleRuntime",
    ),
    "qwen2-vl": PipelineParts(
        "mmaas.spec.pipelines.qwen2_vl:Qwen2VLKind",
        "mmaas.server.pipelines.qwen2_vl.runtime:Qwen2VLRuntime",
        ("pillow", "tokenizers"),
    ),
}


def load_part(kind: str, part: str) -> Any:
    """An instance of ``kind``'s ``part`` (``"spec"`` or ``"runtime"``).

    Raises:
        UsageError: an unknown kind (a manifest from another mmaas), listing the known.
    """
    parts = PIPELINES.get(kind)
    if parts is None:
        raise UsageError(
            f"unknown pipeline kind {kind!r}; this mmaas knows: {', '.join(sorted(PIPELINES))}"
        )
    module, _, attribute = str(getattr(parts, part)).partition(":")
    return getattr(importlib.import_module(module), attribute)()
