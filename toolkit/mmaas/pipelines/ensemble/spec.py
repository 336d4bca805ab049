"""The ``ensemble`` pipeline kind (spec part): engines run as steps in order, wired by
tensor names, as Triton's ensemble scheduling does (``ensemble_scheduling.step``:
``model_name``, ``input_map``, ``output_map``)::

    pipeline:
      kind: ensemble
      settings:
        steps:
          - engine: det
            inputs: {x: image}                  # engine input: pipeline tensor
            outputs: {sigmoid_0.tmp_0: text_map} # engine output: pipeline tensor
          - engine: cls
            inputs: {x: crops}
            outputs: {"save_infer_model/scale_0.tmp_1": direction}

Rules: every input of a step's engine is mapped, and only its inputs and outputs are
named; a step reads pipeline inputs or tensors of earlier steps; no tensor is produced
twice. The pipeline model's inputs are the tensors no step produces (datatype and shape
of the engine inputs they feed; fed to several, their profiles intersect); its outputs
are every tensor a step produces. Its ``max_batch_size`` is the smallest of the engines'
(0 when one has no batch axis).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

from pydantic import Field

from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.spec.base import Strict
from mmaas.spec.parts import PartName
from mmaas.spec.pipeline import PipelineSignature
from mmaas.spec.yamlio import KeyPath

TensorName = Annotated[str, Field(min_length=1)]


class StepSpec(Strict):
    """One step: the engine it runs, its input map (engine input: pipeline tensor) and
    output map (engine output: pipeline tensor)."""

    engine: PartName
    inputs: dict[TensorName, TensorName]
    outputs: Annotated[dict[TensorName, TensorName], Field(min_length=1)]


class EnsembleSettings(Strict):
    """``pipeline.settings`` of an ensemble: its steps, run in order."""

    steps: Annotated[list[StepSpec], Field(min_length=1)]


class EnsembleKind:
    """The spec part of the ensemble kind (:class:`mmaas.spec.pipeline.PipelineKind`)."""

    settings = EnsembleSettings

    def check(
        self,
        settings: EnsembleSettings,
        engines: Mapping[str, ModelInfo],
        assets: Mapping[str, Path],
    ) -> list[tuple[KeyPath, str]]:
        """Every wiring problem (see the module docstring), located under
        ``pipeline.settings``."""
        problems: list[tuple[KeyPath, str]] = []
        produced: dict[str, int] = {}
        producer: dict[str, int] = {}
        for index, step in enumerate(settings.steps):
            for tensor in step.outputs.values():
                producer.setdefault(tensor, index)
        for index, step in enumerate(settings.steps):
            where: KeyPath = ("steps", index)
            info = engines.get(step.engine)
            if info is None:
                known = ", ".join(map(repr, engines))
                problems.append(
                    ((*where, "engine"), f"no engine {step.engine!r}; the engines are: {known}")
                )
                continue
            names = [t.name for t in info.inputs]
            for name, tensor in step.inputs.items():
                if name not in names:
                    problems.append(((*where, "inputs", name), _unknown(info, "input", name)))
                elif producer.get(tensor, -1) >= index:
                    problems.append(
                        (
                            (*where, "inputs", name),
                            f"tensor {tensor!r} is made by step {producer[tensor]}, which runs "
                            "later (steps run in order); move this step after it",
                        )
                    )
            missing = [name for name in names if name not in step.inputs]
            if missing:
                problems.append(
                    (
                        (*where, "inputs"),
                        f"engine {step.engine!r} input "
                        f"{', '.join(map(repr, missing))} is not mapped; map each to a tensor",
                    )
                )
            outputs = [t.name for t in info.outputs]
            for name, tensor in step.outputs.items():
                if name not in outputs:
                    problems.append(((*where, "outputs", name), _unknown(info, "output", name)))
                elif tensor in produced:
                    problems.append(
                        (
                            (*where, "outputs", name),
                            f"tensor {tensor!r} is already made by step "
                            f"{produced[tensor]}; give it another name",
                        )
                    )
                else:
                    produced[tensor] = index
        if not problems:
            problems += _check_flow(settings, engines)
        return problems

    def signature(
        self, settings: EnsembleSettings, engines: Mapping[str, ModelInfo]
    ) -> PipelineSignature:
        """The ensemble's inputs, outputs and batch size (see the module docstring)."""
        produced = {t: (s, n) for s in settings.steps for n, t in s.outputs.items()}
        consumers: dict[str, list[TensorInfo]] = {}
        for step in settings.steps:
            declared = {t.name: t for t in engines[step.engine].inputs}
            for name, tensor in step.inputs.items():
                if tensor not in produced:
                    consumers.setdefault(tensor, []).append(declared[name])
        outputs = []
        for tensor, (step, name) in produced.items():
            made = next(t for t in engines[step.engine].outputs if t.name == name)
            outputs.append(TensorInfo(tensor, made.datatype, made.shape))
        batches = [engines[step.engine].max_batch_size for step in settings.steps]
        return PipelineSignature(
            inputs=tuple(_merged(tensor, fed) for tensor, fed in consumers.items()),
            outputs=tuple(outputs),
            max_batch_size=0 if 0 in batches else min(batches),
        )


def _unknown(info: ModelInfo, role: str, name: str) -> str:
    tensors = info.inputs if role == "input" else info.outputs
    known = ", ".join(repr(t.name) for t in tensors)
    return f"the engine has no {role} {name!r}; its {role}s are: {known}"


def _check_flow(
    settings: EnsembleSettings, engines: Mapping[str, ModelInfo]
) -> list[tuple[KeyPath, str]]:
    """A tensor feeding an engine input has that input's datatype and rank; a pipeline
    input feeding several has one profile that fits them all."""
    made = {
        tensor: next(t for t in engines[s.engine].outputs if t.name == name)
        for s in settings.steps
        for name, tensor in s.outputs.items()
    }
    first: dict[str, TensorInfo] = {}
    problems: list[tuple[KeyPath, str]] = []
    for index, step in enumerate(settings.steps):
        declared = {t.name: t for t in engines[step.engine].inputs}
        for name, tensor in step.inputs.items():
            want, have = (
                declared[name],
                made.get(tensor) or first.setdefault(tensor, declared[name]),
            )
            if (want.datatype, len(want.shape)) != (have.datatype, len(have.shape)):
                problems.append(
                    (
                        ("steps", index, "inputs", name),
                        f"tensor {tensor!r} is {have.datatype} "
                        f"{list(have.shape)}, but engine input {name!r} takes {want.datatype} "
                        f"{list(want.shape)}",
                    )
                )
            elif tensor not in made and _merged(tensor, [have, want]).min is None:
                problems.append(
                    (
                        ("steps", index, "inputs", name),
                        f"tensor {tensor!r} feeds inputs "
                        "whose optimization profiles do not overlap; use two pipeline inputs",
                    )
                )
    return problems


def _merged(name: str, fed: list[TensorInfo]) -> TensorInfo:
    """The pipeline input ``name`` feeding the engine inputs ``fed``: their intersected
    profile (``min``/``max`` None when they do not overlap)."""
    base = fed[0]
    shapes = [t.shape for t in fed]
    shape = tuple(max(dims) if -1 in dims else dims[0] for dims in zip(*shapes, strict=True))
    low = tuple(map(max, zip(*(t.min or t.shape for t in fed), strict=True)))
    high = tuple(map(min, zip(*(t.max or t.shape for t in fed), strict=True)))
    if any(a > b for a, b in zip(low, high, strict=True)):
        return TensorInfo(name, base.datatype, shape)
    opt = tuple(min(max(o, a), b) for o, a, b in zip(base.opt or low, low, high, strict=True))
    return TensorInfo(name, base.datatype, shape, low, opt, high)
