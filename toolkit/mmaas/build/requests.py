"""A completed spec -> the typed requests the builder stage reads. Pure.

:func:`engine_request` is what the compile reads: the signature with a neutral name and
version, the back end's engine settings (its build target's frozen type), the gates and
the staged paths of the source and samples; everything else in model.yaml (name,
version, description, runtime, image) leaves it, and so the engine, unchanged (C13). Its
JSON is also the spec part of the engine-cache key. :func:`build_request` is what the stamp
step reads: the same with this build's name, version and spec digest.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

from mmaas.backends import get_target
from mmaas.core.hashing import bytes_digest
from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.core.request import BuildRequest, Checks
from mmaas.spec.model import ChecksSpec, InputSpec, ModelSpec, OutputSpec
from mmaas.spec.sample_values import sample_values

# name and version of the engine request's model: neutral, so that the compile's layer
# and the engine-cache key survive a rename or a version bump (the stamp step sets them).
ENGINE_MODEL = ("engine", "0")


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


def checks(spec: ChecksSpec) -> Checks:
    """``checks:`` of model.yaml as the stage's typed gates (one conversion: the JSON form
    the request file carries)."""
    return Checks.from_json(spec.model_dump(mode="json"))


def engine_request(spec: ModelSpec, source: Path, engine_key: str | None) -> BuildRequest:
    """The compile's request for a completed ``spec`` whose ONNX file is ``source`` (staged
    as ``model/<name>``); its ``spec_digest`` is the digest of its own engine part."""
    neutral = _request(spec, source, "", None)
    neutral = replace(
        neutral, model=replace(neutral.model, name=ENGINE_MODEL[0], version=ENGINE_MODEL[1])
    )
    return replace(neutral, spec_digest=engine_digest(neutral), engine_key=engine_key)


def build_request(spec: ModelSpec, source: Path, engine_key: str | None) -> BuildRequest:
    """The stamp step's request: the served signature and the whole spec's digest."""
    return _request(spec, source, spec.digest(), engine_key)


def engine_digest(request: BuildRequest) -> str:
    """``sha256:<hex>`` of what of ``request`` determines the engine (all but its digest
    and key)."""
    part = replace(request, spec_digest="", engine_key=None)
    return bytes_digest(part.to_json().encode())


def _request(
    spec: ModelSpec, source: Path, spec_digest: str, engine_key: str | None
) -> BuildRequest:
    accuracy = spec.checks.accuracy
    return BuildRequest(
        model=model_info(spec),
        source=f"model/{source.name}",
        settings=asdict(get_target(spec.backend).engine_settings(spec)),
        checks=checks(spec.checks),
        samples=tuple(f"model/{s}" for s in accuracy.samples) if accuracy else (),
        spec_digest=spec_digest,
        engine_key=engine_key,
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
