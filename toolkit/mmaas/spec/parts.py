"""The sections of model.yaml that compose a model from parts: ``assets:`` (side files
the served model needs) and ``pipeline:`` (one served model made of the engines). Engine
sections (``engines:``) are :class:`mmaas.spec.model.EngineSpec`."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, WithJsonSchema

from mmaas.core.pipelines import PipelineName
from mmaas.spec.base import Strict

# Engine and asset names: folder names in the model directory and parts of label keys.
PART_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
PartName = Annotated[str, Field(pattern=PART_PATTERN)]


class AssetSpec(Strict):
    """A side file the served model needs (``assets.<name>``; e.g. a tokenizer): ``path``
    relative to the model folder, optionally pinned by ``sha256`` (hex). The short form
    ``name: path`` means ``name: {path: path}``. It lands in the image at
    ``<model dir>/assets/<path>``, hashed into the manifest and verified with the engines."""

    path: Annotated[str, Field(min_length=1)]
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None = None


def _asset_short_form(value: object) -> object:
    return {"path": value} if isinstance(value, str) else value


Asset = Annotated[
    AssetSpec,
    BeforeValidator(_asset_short_form),
    WithJsonSchema({"anyOf": [{"type": "string", "minLength": 1}, AssetSpec.model_json_schema()]}),
]


class PipelineSpec(Strict):
    """One served model composed from the engines (``pipeline:``): its ``kind`` (a
    registered pipeline kind), the kind's own ``settings`` (validated by the kind), and
    ``serve_engines``: the engines also served alone beside it as ``<name>-<engine>``
    (default: every engine; ``[]``: none)."""

    kind: PipelineName
    serve_engines: list[PartName] | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
