"""The ONNX Runtime engine settings: what of ``build:`` in model.yaml changes an ONNX Runtime
engine, as the build target writes them into the build request and the compiler reads them
back (one frozen type on both sides of the container boundary)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class OnnxRuntimeSettings:
    """``graph_optimization_level``: ``basic``, ``extended`` or ``all``
    (``SessionOptions.graph_optimization_level``; ``build.onnxruntime`` in model.yaml)."""

    graph_optimization_level: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OnnxRuntimeSettings:
        """Read back the ``dataclasses.asdict`` form. Raises KeyError/TypeError."""
        return cls(**data)
