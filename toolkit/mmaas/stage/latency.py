"""The build-time latency gate (``checks.latency`` in model.yaml), run by the builder stage.

The p99 of ``runs`` timed inferences (after ``warmup`` untimed ones) at the gate's shapes
must be at most ``p99_ms``. The back end's own timer is used when it offers one
(:meth:`mmaas.backends.Compiler.latency_probe`: TensorRT's times trtexec's ``--loadEngine
--shapes --iterations --warmUp`` runs); otherwise wall time around
``Engine.infer`` (ONNX Runtime on CPU: one ``InferenceSession.run`` per request).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from mmaas.backends import Engine, LatencyProbe
from mmaas.core.manifest import ModelInfo
from mmaas.core.request import LatencyCheck
from mmaas.core.samples import sample_inputs
from mmaas.stage.accuracy import GateFailed


def latency_gate(
    engine: Engine, model: ModelInfo, check: LatencyCheck, probe: LatencyProbe | None = None
) -> dict[str, Any]:
    """Time the engine at the gate's shapes (``checks.latency``) and compare the
    p99 with ``p99_ms``. ``probe`` is the back end's own timer, if any.

    Returns ``{"passed", "budget_p99_ms", "shapes", "runs", "warmup", "p50_ms", "p90_ms",
    "p99_ms", "mean_ms", "max_ms", "timer"}`` (milliseconds). Raises GateFailed printing
    the measured figures when p99 exceeds the budget.
    """
    shapes = latency_shapes(model, check)
    runs, warmup = check.runs, check.warmup
    measured = (
        dict(probe(shapes, runs, warmup))
        if probe
        else _wall_clock(engine, model, shapes, runs, warmup)
    )
    budget = check.p99_ms
    report = {
        "budget_p99_ms": budget,
        "shapes": {k: list(v) for k, v in shapes.items()},
        "runs": runs,
        "warmup": warmup,
        **measured,
        "passed": measured["p99_ms"] <= budget,
    }
    if not report["passed"]:
        at = ", ".join(f"{name}: {'x'.join(map(str, s))}" for name, s in shapes.items())
        raise GateFailed(
            f"latency gate failed: p99 {measured['p99_ms']:.3f} ms at {at} exceeds the budget "
            f"{budget:g} ms (p50 {measured['p50_ms']:.3f} ms, p90 {measured['p90_ms']:.3f} ms, "
            f"mean {measured['mean_ms']:.3f} ms, max {measured['max_ms']:.3f} ms over {runs} "
            f"runs; {measured['timer']})",
            report,
            hint="raise checks.latency.p99_ms, lower the batch or shapes, or build a faster "
            "engine (precision, back end)",
        )
    return report


def latency_shapes(model: ModelInfo, check: LatencyCheck) -> dict[str, tuple[int, ...]]:
    """Shapes the latency gate runs at: each input's opt shape, replaced by ``shapes`` given
    for it; ``batch`` then sets axis 0 of every input."""
    given, batch = check.shapes, check.batch
    shapes = {}
    for tensor in model.inputs:
        shape = tuple(given.get(tensor.name) or tensor.opt or tensor.shape)
        shapes[tensor.name] = (batch, *shape[1:]) if batch and shape else shape
    return shapes


def _wall_clock(
    engine: Engine, model: ModelInfo, shapes: Mapping[str, tuple[int, ...]], runs: int, warmup: int
) -> dict[str, Any]:
    at_shapes = replace(model, inputs=tuple(replace(t, opt=shapes[t.name]) for t in model.inputs))
    inputs, names = sample_inputs(at_shapes, "opt"), [t.name for t in model.outputs]
    for _ in range(warmup):
        engine.infer(inputs, names)
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        engine.infer(inputs, names)
        timings.append((time.perf_counter() - started) * 1000)
    p50, p90, p99 = np.percentile(timings, [50, 90, 99])
    return {
        "p50_ms": round(float(p50), 3),
        "p90_ms": round(float(p90), 3),
        "p99_ms": round(float(p99), 3),
        "mean_ms": round(float(np.mean(timings)), 3),
        "max_ms": round(max(timings), 3),
        "timer": "wall time around Engine.infer (time.perf_counter), one request at a time",
    }
