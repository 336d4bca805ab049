"""The ensemble kind's runtime part over stand-in engines: only the steps a request's outputs
need run, in order, tensors wired by name; a tensor one step makes that does not fit the
next engine's signature is INVALID_ARGUMENT naming the step, before that engine runs."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import numpy as np
import pytest

from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.pipelines.ensemble.runtime import EnsembleRuntime
from mmaas.server.status import InvalidArgument


class Doubler:
    """An engine's executor: ``out = 2 * in``, recording the calls."""

    def __init__(self, calls: list[str], name: str) -> None:
        self.calls, self.name = calls, name

    async def infer(self, feed, outputs, timeout_s):
        self.calls.append(self.name)
        return {"out": feed["in"] * 2}


def stand_in(name: str, calls: list[str], rank: int = 1) -> SimpleNamespace:
    shape = (-1,) * rank
    info = ModelInfo(name, "1", "onnxruntime", "fp32", 0,
                     (TensorInfo("in", "FP32", shape, (1,) * rank, (2,) * rank, (8,) * rank),),
                     (TensorInfo("out", "FP32", shape),))  # fmt: skip
    return SimpleNamespace(manifest=SimpleNamespace(model=info), executor=Doubler(calls, name))


def executor(calls: list[str], rank_of_c: int = 1):
    steps = [
        {"engine": "a", "inputs": {"in": "x"}, "outputs": {"out": "ax"}},
        {"engine": "b", "inputs": {"in": "ax"}, "outputs": {"out": "bx"}},
        {"engine": "c", "inputs": {"in": "x"}, "outputs": {"out": "cx"}},
    ]
    engines = {"a": stand_in("a", calls), "b": stand_in("b", calls),
               "c": stand_in("c", calls, rank_of_c)}  # fmt: skip
    context = SimpleNamespace(settings={"steps": steps}, engines=engines)
    return EnsembleRuntime().executor(context)  # type: ignore[arg-type]


def test_only_the_steps_the_outputs_need_run_in_order() -> None:
    calls: list[str] = []
    x = np.array([1.0, 2.0], np.float32)
    result = asyncio.run(executor(calls).infer({"x": x}, ["bx"], None))
    assert calls == ["a", "b"]
    assert result["bx"].tolist() == [4.0, 8.0] and list(result) == ["bx"]
    calls.clear()
    asyncio.run(executor(calls).infer({"x": x}, ["cx", "ax"], None))
    assert calls == ["a", "c"]


def test_a_tensor_that_does_not_fit_the_next_engine_names_the_step() -> None:
    calls: list[str] = []
    x = np.array([1.0, 2.0], np.float32)
    with pytest.raises(InvalidArgument, match=r"^step 2 \(engine 'c'\): "):
        asyncio.run(executor(calls, rank_of_c=2).infer({"x": x}, ["cx"], None))
    assert calls == []
