"""The stamp step's request: how the package build's builder stage assembles one model
directory from the staged engine directories and assets (``build-request.json``).

The build plan (:mod:`mmaas.build.requests`) writes it; ``python -m mmaas.stage stamp``
reads it back (:meth:`ModelRequest.from_json`) and writes the model manifest
(:mod:`mmaas.core.model_manifest`). Plain dataclasses + json: the builder stage needs no
pydantic.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from mmaas.core.manifest import ModelInfo, model_info_from_dict
from mmaas.core.model_manifest import PipelineRecord


@dataclass(frozen=True)
class EngineStamp:
    """One engine to adopt: its name in model.yaml, its engine directory relative to the
    staged tree (also its folder in the model directory: ``.`` for a single engine, else
    the engine name), the signature it is served with (served name, version) and the
    engine-cache key it must have been built for (None: unknown)."""

    name: str
    directory: str
    model: ModelInfo
    engine_key: str | None


@dataclass(frozen=True)
class AssetStamp:
    """One asset: its name, its path in the staged tree (``assets/<path>``) and the
    ``sha256:<hex>`` model.yaml pins it to (None: not pinned)."""

    name: str
    path: str
    sha256: str | None


@dataclass(frozen=True)
class ModelRequest:
    """The whole stamp request: the model's name, version and spec digest, its engines in
    model.yaml's order, its assets, its pipeline (None: each engine is its own model) and
    the host's part of the provenance record (:mod:`mmaas.build.provenance`)."""

    name: str
    version: str
    spec_digest: str
    engines: tuple[EngineStamp, ...]
    assets: tuple[AssetStamp, ...] = ()
    pipeline: PipelineRecord | None = None
    provenance: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        """The request file's text (indented JSON, keys sorted, newline-terminated)."""
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> ModelRequest:
        """Read back :meth:`to_json`'s text.

        Raises:
            ValueError: not JSON. KeyError, TypeError: a field is missing or malformed.
        """
        raw: dict[str, Any] = json.loads(text)
        pipeline = raw["pipeline"]
        return cls(
            name=raw["name"],
            version=raw["version"],
            spec_digest=raw["spec_digest"],
            engines=tuple(
                EngineStamp(
                    e["name"], e["directory"], model_info_from_dict(e["model"]), e["engine_key"]
                )
                for e in raw["engines"]
            ),
            assets=tuple(AssetStamp(a["name"], a["path"], a["sha256"]) for a in raw["assets"]),
            pipeline=None if pipeline is None else PipelineRecord.from_dict(pipeline),
            provenance=dict(raw.get("provenance") or {}),
        )
