"""Build-time gates on a compiled engine (``checks:`` in model.yaml), run by the builder stage.

Accuracy: the engine's outputs are compared with ONNX Runtime's on the ORIGINAL ONNX model
(CPU execution provider, graph optimizations off, the model's own precision: fp32 for an
fp32 export) for every sample input; an output fails when an element exceeds
``atol + rtol * |reference|`` (``numpy.allclose``) or the cosine similarity of the flattened
outputs is below ``min_cosine``. Latency: the p99 of ``runs`` timed inferences at the
gate's shapes must be at most ``p99_ms``; the back end's own timer is used when it offers
one (``Compiler.latency_probe``, e.g. trtexec's), else wall time around ``Engine.infer``.
A failed gate raises :class:`GateFailed` carrying the whole report; a passed gate's report
goes into ``report.json`` and the manifest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mmaas.backends import Engine
from mmaas.core.errors import BuildError
from mmaas.core.manifest import ModelInfo
from mmaas.core.ort_io import has_bfloat16, import_onnxruntime, run_session, session_options
from mmaas.core.request import AccuracyCheck
from mmaas.core.samples import sample_inputs

DEFAULT_ATOL, DEFAULT_RTOL = 1e-4, 1e-3
Sample = tuple[str, dict[str, np.ndarray]]


class GateFailed(BuildError):
    """A build-time gate failed; ``report`` is the gate's whole report (JSON-ready)."""

    def __init__(self, message: str, report: Mapping[str, Any], *, hint: str) -> None:
        super().__init__(message, hint=hint)
        self.report = dict(report)


def accuracy_gate(
    engine: Engine,
    model: ModelInfo,
    source: Path,
    check: AccuracyCheck,
    samples: Sequence[Sample],
) -> dict[str, Any]:
    """Compare ``engine`` with ONNX Runtime on ``source`` for each of ``samples`` (label,
    arrays by input name; none: one random input at the opt shapes, ``check.seed``).

    Returns ``{"passed", "reference",
    "samples", "outputs": {name: {"atol", "rtol", "min_cosine", "max_abs_diff",
    "max_rel_diff", "cosine", "worst": {"sample", "index", "engine", "reference"},
    "passed"}}}``. Raises GateFailed naming the first failing output and its worst element.
    """
    samples = list(samples) or [
        (
            f"random (seed {check.seed}) at the opt shapes",
            sample_inputs(model, "opt", check.seed),
        )
    ]
    reference, version = _reference_session(source)
    bfloat16 = has_bfloat16(reference)
    names = [t.name for t in model.outputs if t.datatype != "BYTES"]
    stats: dict[str, dict[str, Any]] = {}
    for label, arrays in samples:
        fetched = run_session(reference, names, arrays, bfloat16=bfloat16)
        expected = dict(zip(names, fetched, strict=True))
        actual = engine.infer(arrays, names)
        for name in names:
            found = compare(actual[name], expected[name], tolerance(check, name), label)
            stats[name] = _worse(stats.get(name), found)
    report = {
        "passed": all(s["passed"] for s in stats.values()),
        "reference": f"onnxruntime {version} CPU, graph optimizations off, on {source.name}",
        "samples": [label for label, _ in samples],
        "outputs": stats,
    }
    failed = [name for name, s in stats.items() if not s["passed"]]
    if failed:
        raise GateFailed(
            _accuracy_message(failed[0], stats[failed[0]]),
            report,
            hint="the engine is less accurate than checks.accuracy in model.yaml "
            "allows: build at a higher precision, or loosen atol/rtol/"
            "min_cosine if this difference is acceptable",
        )
    return report


def tolerance(check: AccuracyCheck, output: str) -> dict[str, float | None]:
    """The effective ``{"atol", "rtol", "min_cosine"}`` of ``output``: its entry under
    ``outputs``, else the section's; ``atol`` 1e-4 and ``rtol`` 1e-3 when none is set."""
    own = check.outputs.get(output)
    picked = {
        key: getattr(own, key) if own and getattr(own, key) is not None else getattr(check, key)
        for key in ("atol", "rtol", "min_cosine")
    }
    if all(value is None for value in picked.values()):
        picked.update(atol=DEFAULT_ATOL, rtol=DEFAULT_RTOL)
    return picked


def compare(
    actual: np.ndarray, expected: np.ndarray, allowed: Mapping[str, float | None], label: str
) -> dict[str, Any]:
    """Compare one output of one sample; see :func:`accuracy_gate` for the fields."""
    result: dict[str, Any] = {**allowed, "sample": label}
    if actual.shape != expected.shape:
        return {
            **result,
            "passed": False,
            "problem": f"shape {list(actual.shape)}, reference {list(expected.shape)}",
        }
    got, want = actual.astype(np.float64).ravel(), expected.astype(np.float64).ravel()
    if np.any(np.isnan(got) != np.isnan(want)):
        return {**result, "passed": False, "problem": "NaN where the reference has a number"}
    got, want = np.nan_to_num(got), np.nan_to_num(want)
    diff = np.abs(got - want)
    elementwise = allowed["atol"] is not None or allowed["rtol"] is not None
    bound = (allowed["atol"] or 0.0) + (allowed["rtol"] or 0.0) * np.abs(want)
    worst = int(np.argmax(diff - bound)) if diff.size else 0
    cosine = _cosine(got, want)
    passed = (not elementwise or bool(np.all(diff <= bound))) and (
        allowed["min_cosine"] is None or cosine >= allowed["min_cosine"]
    )
    index = [int(i) for i in np.unravel_index(worst, actual.shape)] if diff.size else []
    return {
        **result,
        "passed": passed,
        "cosine": cosine,
        "max_abs_diff": float(diff.max(initial=0.0)),
        "max_rel_diff": float((diff / np.maximum(np.abs(want), 1e-12)).max(initial=0.0)),
        "worst": {
            "index": index,
            "engine": float(got[worst]) if diff.size else None,
            "reference": float(want[worst]) if diff.size else None,
            "allowed": float(bound[worst]) if diff.size and elementwise else None,
        },
    }


def _reference_session(source: Path) -> tuple[Any, str]:
    ort = import_onnxruntime()

    options = session_options(ort)
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        session = ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # ORT raises its own untyped exceptions
        raise BuildError(
            f"accuracy gate: ONNX Runtime cannot run the reference model {source.name}: {exc}"
        ) from exc
    return session, str(ort.__version__)


def _cosine(got: np.ndarray, want: np.ndarray) -> float:
    norms = float(np.linalg.norm(got) * np.linalg.norm(want))
    if norms == 0.0:
        return 1.0 if not got.any() and not want.any() else 0.0
    return float(np.dot(got, want) / norms)


def _worse(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """Keep the sample that fails, else the one with the larger difference."""
    if old is None or (old["passed"] and not new["passed"]):
        return new
    if new["passed"] == old["passed"] and new.get("max_abs_diff", 0) > old.get("max_abs_diff", 0):
        return new
    return old


def _accuracy_message(name: str, stats: Mapping[str, Any]) -> str:
    where = f"accuracy gate failed for output {name!r} (sample: {stats['sample']})"
    if "problem" in stats:
        return f"{where}: {stats['problem']}"
    worst = stats["worst"]
    difference = abs(worst["engine"] - worst["reference"])
    text = (
        f"{where}: worst element {worst['index']}: engine {worst['engine']:.6g}, reference "
        f"{worst['reference']:.6g}, |difference| {difference:.6g}"
    )
    if worst["allowed"] is not None:
        text += (
            f" > allowed {worst['allowed']:.6g} (atol {stats['atol'] or 0} + rtol "
            f"{stats['rtol'] or 0} * |reference|)"
        )
    text += f"; max |difference| {stats['max_abs_diff']:.6g}"
    if stats["min_cosine"] is not None:
        text += f"; cosine similarity {stats['cosine']:.6f} (min {stats['min_cosine']})"
    return text
