"""A model's engines as single-engine specs ("engine views"), and the names they are
served under.

Everything downstream that builds one engine -- the back ends' build targets, the compile
build's plan, the engine-cache key, the typed requests -- takes a single-engine
:class:`~mmaas.spec.model.ModelSpec`. A multi-engine model (``engines:``) is built as one
such view per engine, each carrying the model's version, description, runtime and image
settings and the engine's own keys, so each engine compiles and caches on its own: a
sibling's change leaves its key unchanged.

Served names (docs/design.md, "Model repository"): a model with one engine and no
pipeline serves it as ``<name>``; otherwise each engine is ``<name>-<engine>`` and a
pipeline model takes ``<name>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.core.model_manifest import SINGLE_ENGINE
from mmaas.spec.model import ENGINE_KEYS, EngineSpec, ImageSpec, InputSpec, ModelSpec, OutputSpec
from mmaas.spec.sample_values import sample_values


def engine_names(spec: ModelSpec) -> list[str]:
    """The engines' names in model.yaml's order (``model`` for a single-engine spec)."""
    return [SINGLE_ENGINE] if spec.engines is None else list(spec.engines)


def served_name(spec: ModelSpec, engine: str) -> str:
    """The KServe v2 model name the engine ``engine`` is served under."""
    if spec.pipeline is None and len(engine_names(spec)) == 1:
        return spec.name
    return f"{spec.name}-{engine}"


def engine_view(spec: ModelSpec, engine: str) -> ModelSpec:
    """The single-engine spec of ``engine``: its keys, the served name, and the model's
    version, description, runtime and image (``image.repository`` kept as the model's).

    Raises:
        KeyError: ``spec`` has no engine ``engine``.
    """
    if spec.engines is None:
        if engine != SINGLE_ENGINE:
            raise KeyError(engine)
        section = {key: getattr(spec, key) for key in ENGINE_KEYS}
    else:
        section = dict(spec.engines[engine])
    image: ImageSpec = spec.image.model_copy(update={"repository": spec.image_repository})
    return spec.model_copy(
        update={
            **section,
            "name": served_name(spec, engine),
            "engines": None,
            "assets": {},
            "pipeline": None,
            "image": image,
        }
    )


def engine_views(spec: ModelSpec) -> dict[str, ModelSpec]:
    """:func:`engine_view` of every engine, in model.yaml's order."""
    return {name: engine_view(spec, name) for name in engine_names(spec)}


def with_engines(spec: ModelSpec, views: Mapping[str, ModelSpec]) -> ModelSpec:
    """``spec`` with each engine's keys taken from its (completed) view."""
    if spec.engines is None:
        (view,) = views.values()
        return spec.model_copy(update={key: getattr(view, key) for key in ENGINE_KEYS})
    engines = {
        name: EngineSpec.model_construct(**{key: getattr(views[name], key) for key in ENGINE_KEYS})
        for name in spec.engines
    }
    return spec.model_copy(update={"engines": engines})


def model_info(spec: ModelSpec) -> ModelInfo:
    """The served signature of a completed spec (every tensor has datatype and shape)."""
    return ModelInfo(
        name=spec.name,
        version=spec.version,
        backend=spec.backend,
        precision=spec.target_precision,
        max_batch_size=spec.max_batch_size,
        inputs=tuple(_tensor(t) for t in spec.inputs),
        outputs=tuple(_tensor(t) for t in spec.outputs),
    )


def _tensor(spec: InputSpec | OutputSpec) -> TensorInfo:
    tensor = TensorInfo(
        name=spec.name, datatype=spec.datatype or "FP32", shape=tuple(spec.shape or ())
    )
    if not isinstance(spec, InputSpec):
        return tensor
    return replace(
        tensor,
        min=spec.min,
        opt=spec.opt,
        max=spec.max,
        sample_values=sample_values(spec.sample_values),
    )
