"""The build request: what the host's build plan hands the builder stage, one frozen type.

The plan (:mod:`mmaas.build.requests`) converts a validated spec into a
:class:`BuildRequest` once and writes it as JSON into the build context
(``engine-request.json`` for the compile, ``build-request.json`` for the stamp step); the
builder stage (``python -m mmaas.stage``) reads it back with :meth:`BuildRequest.from_json`
into the same type. Defaults live in the spec (``mmaas.spec.model``) only: every field here
is filled by the plan. ``settings`` is the back end's own engine-settings type in its JSON
form; the back end's compiler reads it back (:meth:`mmaas.backends.Compiler.read_settings`).
Plain dataclasses + json: the builder stage needs no pydantic.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from mmaas.core.manifest import ModelInfo, model_info_from_dict

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Tolerance:
    """How far an engine output may be from ONNX Runtime's reference (``numpy.allclose``
    ``atol`` / ``rtol``; ``min_cosine``: cosine similarity of the flattened outputs)."""

    atol: float | None = None
    rtol: float | None = None
    min_cosine: float | None = None


@dataclass(frozen=True)
class AccuracyCheck(Tolerance):
    """``checks.accuracy``: the section's tolerance, per-output overrides, the sample files
    as the user named them (the staged paths are :attr:`BuildRequest.samples`) and the seed
    of the random input used when there are none."""

    seed: int = 0
    samples: tuple[str, ...] = ()
    outputs: Mapping[str, Tolerance] = field(default_factory=dict)


@dataclass(frozen=True)
class LatencyCheck:
    """``checks.latency``: p99 budget in ms over ``runs`` timed runs after ``warmup`` ones,
    at ``shapes`` (per input; others use their opt shape), ``batch`` setting axis 0."""

    p99_ms: float
    runs: int
    warmup: int
    shapes: Mapping[str, Shape] = field(default_factory=dict)
    batch: int | None = None


@dataclass(frozen=True)
class GenerationCheck:
    """``checks.generation``: the sample file as the user named it, the least share of
    greedy tokens equal to the reference's and the least first-step logits cosine."""

    samples: str
    min_top1: float
    min_cosine: float


@dataclass(frozen=True)
class Checks:
    """The build-time gates the stage runs (``checks:`` in model.yaml), and
    ``stated_outputs``: the outputs whose shape model.yaml states where the ONNX graph
    declares another (the real shape of an output the graph mis-declares): the profile
    check fails when a run's output does not fit such a shape, and only warns for the
    others (:mod:`mmaas.stage.outputs`)."""

    accuracy: AccuracyCheck | None = None
    latency: LatencyCheck | None = None
    generation: GenerationCheck | None = None
    stated_outputs: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Checks:
        """From the JSON form of ``checks:`` (the spec's ``model_dump(mode="json")``, or
        :func:`dataclasses.asdict` of a Checks). Raises KeyError/TypeError when malformed."""
        accuracy, latency = raw.get("accuracy"), raw.get("latency")
        generation = raw.get("generation")
        return cls(
            generation=None if generation is None else GenerationCheck(**generation),
            accuracy=None
            if accuracy is None
            else AccuracyCheck(
                atol=accuracy["atol"],
                rtol=accuracy["rtol"],
                min_cosine=accuracy["min_cosine"],
                seed=accuracy["seed"],
                samples=tuple(accuracy["samples"]),
                outputs={name: Tolerance(**value) for name, value in accuracy["outputs"].items()},
            ),
            latency=None
            if latency is None
            else LatencyCheck(
                p99_ms=latency["p99_ms"],
                runs=latency["runs"],
                warmup=latency["warmup"],
                shapes={name: tuple(dims) for name, dims in latency["shapes"].items()},
                batch=latency["batch"],
            ),
            stated_outputs=tuple(raw.get("stated_outputs", ())),
        )


@dataclass(frozen=True)
class BuildRequest:
    """One build request file.

    Attributes:
        model: the served signature (the engine request's has a neutral name and version).
        source: the ONNX file, relative to the request file (``model/<name>.onnx``).
        settings: the back end's engine settings as JSON (``dataclasses.asdict`` of its type).
        checks: the gates.
        samples: the accuracy gate's sample files, relative to the request file.
        spec_digest: ``sha256:<hex>`` recorded in the manifest.
        engine_key: the engine-cache key (``sha256:<hex>``), or None.
    """

    model: ModelInfo
    source: str
    settings: Mapping[str, Any]
    checks: Checks
    samples: tuple[str, ...]
    spec_digest: str
    engine_key: str | None

    def to_json(self) -> str:
        """The request file's text (indented JSON, keys sorted, newline-terminated)."""
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> BuildRequest:
        """Read back :meth:`to_json`'s text.

        Raises:
            ValueError: not JSON. KeyError, TypeError: a field is missing or malformed.
        """
        raw = json.loads(text)
        return cls(
            model=model_info_from_dict(raw["model"]),
            source=raw["source"],
            settings=raw["settings"],
            checks=Checks.from_json(raw["checks"]),
            samples=tuple(raw["samples"]),
            spec_digest=raw["spec_digest"],
            engine_key=raw["engine_key"],
        )
