"""The ``ensemble`` pipeline kind (runtime part): run the steps in order, each through its
engine's dynamic batcher, wiring tensors by name (Triton's ensemble scheduling; the spec
part, :mod:`mmaas.pipelines.ensemble.spec`, documents the settings and rules).

Only the steps a request's outputs need run. A tensor one step makes is checked against
the next engine's signature (datatype, rank, profile) before it is fed, so a mismatch is
INVALID_ARGUMENT naming the step, never an engine crash.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mmaas.core.datatypes import from_numpy
from mmaas.server.pipeline import LoadedEngine, PipelineContext
from mmaas.server.repository import Arrays
from mmaas.server.signature import check_inputs
from mmaas.server.status import InvalidArgument


@dataclass(frozen=True)
class Step:
    """One step: its engine, input map (engine input: tensor), output map (engine
    output: tensor)."""

    engine: str
    inputs: Mapping[str, str]
    outputs: Mapping[str, str]


class EnsembleRuntime:
    """The runtime part of the ensemble kind (:class:`mmaas.server.pipeline.PipelineRuntime`)."""

    platform = "ensemble"

    def executor(self, context: PipelineContext) -> EnsembleExecutor:
        """The executor over ``context.engines`` for ``context.settings["steps"]``."""
        steps = [Step(s["engine"], s["inputs"], s["outputs"]) for s in context.settings["steps"]]
        return EnsembleExecutor(steps, context.engines)


class EnsembleExecutor:
    """Runs the steps of one request (see the module docstring)."""

    def __init__(self, steps: Sequence[Step], engines: Mapping[str, LoadedEngine]) -> None:
        self.steps = list(steps)
        self.engines = engines

    def start(self) -> None:
        """Nothing to start: the engines' executors run the work."""

    async def close(self) -> None:
        """Nothing to release: the engines' executors are closed by the server."""

    async def infer(
        self, inputs: Arrays, outputs: Sequence[str], timeout_s: float | None
    ) -> Arrays:
        """Run the steps ``outputs`` need, in order; return ``outputs`` by name.

        Raises:
            InvalidArgument: a tensor a step made does not fit the next engine's signature.
            Whatever an engine's executor raises.
        """
        tensors: dict[str, Any] = dict(inputs)
        for index in self._needed(outputs):
            step = self.steps[index]
            engine = self.engines[step.engine]
            feed = {name: tensors[tensor] for name, tensor in step.inputs.items()}
            try:
                check_inputs(
                    engine.manifest.model,
                    [(name, from_numpy(array.dtype), array.shape) for name, array in feed.items()],
                )
            except InvalidArgument as exc:
                raise InvalidArgument(f"step {index} (engine {step.engine!r}): {exc}") from None
            results = await engine.executor.infer(feed, list(step.outputs), timeout_s)
            tensors.update({tensor: results[name] for name, tensor in step.outputs.items()})
        return {name: tensors[name] for name in outputs}

    def _needed(self, outputs: Sequence[str]) -> list[int]:
        """The indexes of the steps that make ``outputs`` or what those steps read."""
        wanted, needed = set(outputs), []
        for index in range(len(self.steps) - 1, -1, -1):
            step = self.steps[index]
            if wanted & set(step.outputs.values()):
                needed.append(index)
                wanted |= set(step.inputs.values())
        return needed[::-1]
