"""A completed spec -> the typed requests the builder stage reads. Pure.

:func:`engine_request` is what the compile reads: the signature with a neutral name and
version, the back end's engine settings (its build target's frozen type), the gates and
the staged paths of the source and samples; everything else in model.yaml (name,
version, description, runtime, image) leaves it, and so the engine, unchanged (C13). Its
JSON is also the spec part of the engine-cache key. :func:`model_request` is what the stamp
step reads: every engine's served signature, the assets and the pipeline, with this
build's name, version and spec digest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmaas.backends import get_target
from mmaas.core.hashing import bytes_digest
from mmaas.core.model_request import AssetStamp, EngineStamp, ModelRequest
from mmaas.core.request import BuildRequest, Checks
from mmaas.spec.composition import asset_target
from mmaas.spec.engines import model_info
from mmaas.spec.gates import ChecksSpec
from mmaas.spec.model import ModelSpec

if TYPE_CHECKING:  # spec.load imports onnx, which CI's change detection has not
    from mmaas.spec.load import LoadedSpec

# name and version of the engine request's model: neutral, so that the compile's layer
# and the engine-cache key survive a rename or a version bump (the stamp step sets them).
ENGINE_MODEL = ("engine", "0")


def checks(spec: ChecksSpec) -> Checks:
    """``checks:`` of model.yaml as the stage's typed gates (one conversion: the JSON form
    the request file carries)."""
    return Checks.from_json(spec.model_dump(mode="json"))


def engine_checks(spec: ModelSpec, source: Path) -> Checks:
    """The stage's checks of a completed single-engine ``spec`` whose ONNX file is
    ``source``: its gates, and the outputs whose shape model.yaml states where the graph
    declares another (:attr:`mmaas.core.request.Checks.stated_outputs`)."""
    from mmaas.spec.onnx_graph import read_signature  # onnx: not in CI's change detection

    declared = {tensor.name: tensor.shape for tensor in read_signature(source).outputs}
    stated = tuple(
        output.name
        for output in spec.outputs
        if output.shape is not None and declared.get(output.name) != tuple(output.shape)
    )
    return replace(checks(spec.checks), stated_outputs=stated)


def engine_request(spec: ModelSpec, source: Path, engine_key: str | None) -> BuildRequest:
    """The compile's request for a completed ``spec`` whose ONNX file is ``source`` (staged
    as ``model/<name>``); its ``spec_digest`` is the digest of its own engine part."""
    neutral = _request(spec, source, "", None)
    neutral = replace(
        neutral, model=replace(neutral.model, name=ENGINE_MODEL[0], version=ENGINE_MODEL[1])
    )
    return replace(neutral, spec_digest=engine_digest(neutral), engine_key=engine_key)


def engine_digest(request: BuildRequest) -> str:
    """``sha256:<hex>`` of what of ``request`` determines the engine (all but its digest
    and key)."""
    part = replace(request, spec_digest="", engine_key=None)
    return bytes_digest(part.to_json().encode())


def _request(
    spec: ModelSpec, source: Path, spec_digest: str, engine_key: str | None
) -> BuildRequest:
    return BuildRequest(
        model=model_info(spec),
        source=f"model/{source.name}",
        settings=asdict(get_target(spec.backend).engine_settings(spec)),
        checks=engine_checks(spec, source),
        samples=tuple(f"model/{s}" for s in spec.checks.sample_files()),
        spec_digest=spec_digest,
        engine_key=engine_key,
    )


def model_request(
    loaded: LoadedSpec,
    engine_keys: Mapping[str, str | None],
    provenance: Mapping[str, Any] | None = None,
) -> ModelRequest:
    """The stamp step's request for ``loaded``: each engine's served signature, its folder
    in the model directory and its engine-cache key (``engine_keys`` by engine name), the
    assets' places and pins, the pipeline record, the whole spec's digest and the host's
    part of the provenance record (:mod:`mmaas.build.provenance`; none: empty)."""
    spec = loaded.spec
    pins = {name: asset.sha256 for name, asset in spec.assets.items()}
    return ModelRequest(
        name=spec.name,
        version=spec.version,
        spec_digest=spec.digest(),
        engines=tuple(
            EngineStamp(
                engine.name,
                loaded.engine_folder(engine.name),
                model_info(engine.spec),
                engine_keys.get(engine.name),
            )
            for engine in loaded.engines
        ),
        assets=tuple(
            AssetStamp(
                name,
                asset_target(loaded.model_dir, path),
                f"sha256:{pins[name]}" if pins[name] else None,
            )
            for name, path in loaded.assets.items()
        ),
        pipeline=loaded.pipeline,
        provenance=dict(provenance or {}),
    )
