"""The profile check's output shapes: what the engine returned at every profile point
against the shape the model serves (``ModelInfo.outputs``: as the ONNX graph declares it,
or as model.yaml states it).

Rules:

* a real shape *fits* a served one when the ranks are equal and every served size is
  ``-1`` or the real size;
* an output whose shape model.yaml states where the graph declares another
  (:attr:`mmaas.core.request.Checks.stated_outputs`) must fit at every point, else the
  build fails naming both shapes;
* any other output that does not fit gets a warning naming both shapes and the fix: state
  the real shape in model.yaml (:func:`observed_shape`: the sizes that changed between
  points as ``-1``), so that metadata, ModelConfig and the Triton export advertise it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mmaas.core.errors import BuildError
from mmaas.core.manifest import ModelInfo


def fits(real: Sequence[int], served: Sequence[int]) -> bool:
    """True when ``real`` (sizes) fits ``served`` (sizes, ``-1`` = dynamic)."""
    return len(real) == len(served) and all(
        want in (-1, got) for got, want in zip(real, served, strict=True)
    )


def observed_shape(shapes: Sequence[Sequence[int]]) -> list[int] | None:
    """The shape that fits every one of ``shapes``: their sizes, ``-1`` where they differ;
    None when their ranks differ."""
    if not shapes or len({len(shape) for shape in shapes}) != 1:
        return None
    return [axis[0] if len(set(axis)) == 1 else -1 for axis in zip(*shapes, strict=True)]


def check_outputs(
    model: ModelInfo, points: Sequence[dict[str, Any]], stated: Sequence[str]
) -> list[str]:
    """Check every output's real shape at each profile point (``points``: the profile
    check's entries, ``{"point", "outputs": {name: dims}}``) against ``model``'s; return
    one warning per output that does not fit its declared shape.

    Raises:
        BuildError: an output of ``stated`` does not fit its stated shape.
    """
    warnings = []
    for tensor in model.outputs:
        runs = [
            (p["point"], p["outputs"][tensor.name]) for p in points if tensor.name in p["outputs"]
        ]
        if all(fits(shape, tensor.shape) for _, shape in runs):
            continue
        returned = ", ".join(f"{shape} at {point}" for point, shape in runs)
        seen = observed_shape([shape for _, shape in runs])
        if tensor.name in stated:
            raise BuildError(
                f"profile check: output {tensor.name!r} returned {returned}, which does not "
                f"fit the shape model.yaml states, {list(tensor.shape)} (-1 = dynamic)",
                hint=f"state the real shape under outputs: in model.yaml ({seen}, the sizes "
                "that change as -1), or remove it",
            )
        fix = (
            f"state the real shape in model.yaml: outputs: [{{name: {tensor.name!r}, "
            f"shape: {seen}}}]"
            if seen
            else "the rank changes with the input: fix the export"
        )
        warnings.append(
            f"output {tensor.name!r} returned {returned}, but the ONNX graph declares "
            f"{list(tensor.shape)} (-1 = dynamic), which metadata, ModelConfig and a "
            f"Triton export advertise; {fix}"
        )
    return warnings
