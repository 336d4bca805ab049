"""The ``checks:`` section of model.yaml (build-time gates): its typed models. The rules
that need the completed spec are in :mod:`mmaas.spec.checks`."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from mmaas.spec.base import Strict
from mmaas.spec.shapes import ProfileShape


class ToleranceSpec(Strict):
    """How far the engine's outputs may be from ONNX Runtime's reference outputs on the
    original ONNX model at fp32. ``atol`` / ``rtol``: every element must satisfy
    ``|engine - reference| <= atol + rtol * |reference|`` (``numpy.allclose``; an unset one
    counts as 0 when the other is set). ``min_cosine``: the cosine similarity of the
    flattened outputs must be at least this. Unset fields fall back to the section's."""

    atol: Annotated[float, Field(ge=0)] | None = None
    rtol: Annotated[float, Field(ge=0)] | None = None
    min_cosine: Annotated[float, Field(ge=-1, le=1)] | None = None


class AccuracySpec(ToleranceSpec):
    """The build-time accuracy gate. ``samples``: input files relative to the model folder
    (``.npz``: one array per input name; ``.npy``: the array of a single-input model); when
    empty, one random input at the opt shapes made with ``seed``. ``outputs``: per-output
    tolerances (by output name) that override the section's. Without any tolerance the
    gate uses ``atol`` 1e-4 and ``rtol`` 1e-3."""

    samples: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    seed: Annotated[int, Field(ge=0)] = 0
    outputs: dict[str, ToleranceSpec] = Field(default_factory=dict)


class LatencySpec(Strict):
    """The build-time latency gate: the engine's p99 latency of one inference, in ms, must
    be at most ``p99_ms``. Measured in the builder stage over ``runs`` timed runs after
    ``warmup`` untimed ones, at ``shapes`` (per input; inputs not listed use their opt
    shape); ``batch`` sets axis 0 of every input (needs ``max_batch_size`` > 0)."""

    p99_ms: Annotated[float, Field(gt=0)]
    shapes: dict[str, ProfileShape] = Field(default_factory=dict)
    batch: Annotated[int, Field(ge=1)] | None = None
    runs: Annotated[int, Field(ge=1, le=100000)] = 50
    warmup: Annotated[int, Field(ge=0, le=10000)] = 5


class GenerationSpec(Strict):
    """The build-time generation gate of a KV-cache decoder engine (the interface of
    :mod:`mmaas.core.decoder`, e.g. qwen2-vl's language engine): ``samples`` is an ``.npz``
    in the model folder holding, per prompt, its embeddings and positions followed by those
    of the reference's greedy continuation, and the reference's tokens and first-step
    logits (``mmaas convert qwen2-vl`` writes ``language_gate.npz`` from transformers at
    FP32). The engine runs each prompt, then decodes along the continuation (teacher
    forced); it passes when its greedy (top-1) token equals the reference's at a share of
    at least ``min_top1`` of all steps, the cosine similarity of its first-step logits and
    the reference's is at least ``min_cosine`` for every prompt, and no logit is NaN or
    infinite."""

    samples: Annotated[str, Field(min_length=1)]
    min_top1: Annotated[float, Field(ge=0, le=1)] = 0.9
    min_cosine: Annotated[float, Field(ge=-1, le=1)] = 0.99


class ChecksSpec(Strict):
    """Build-time gates run on the compiled engine in the builder stage; a failed gate
    fails the build, and each gate's report goes into the manifest."""

    accuracy: AccuracySpec | None = None
    latency: LatencySpec | None = None
    generation: GenerationSpec | None = None

    def sample_files(self) -> list[str]:
        """Every gate's sample file, relative to the model folder (staged with the ONNX
        file, part of the engine-cache key)."""
        files = list(self.accuracy.samples) if self.accuracy else []
        return files + ([self.generation.samples] if self.generation else [])
