"""Cross-check the ``checks:`` section (build-time gates) against the completed spec.

Rules:

* ``checks.accuracy.outputs`` names served outputs; ``checks.latency.shapes`` names inputs;
* ``checks.accuracy.samples`` are ``.npz`` files (one array per input name) or, for a
  single-input model, ``.npy`` files, inside the model folder; every array has its input's
  datatype and a shape inside the optimization profile (min <= dim <= max per axis);
* ``checks.latency.shapes`` are full shapes inside the profile; ``checks.latency.batch``
  needs ``max_batch_size`` > 0, is at most ``max_batch_size`` and agrees with axis 0 of the
  shapes given.

Sample arrays are read here (once, at load time), so a bad file fails ``mmaas validate``
rather than the builder stage.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from mmaas.core.datatypes import to_numpy
from mmaas.core.samples import sample_arrays
from mmaas.spec.gates import LatencySpec
from mmaas.spec.model import InputSpec, ModelSpec
from mmaas.spec.yamlio import KeyPath

SAMPLE_SUFFIXES = (".npz", ".npy")
Report = Callable[[KeyPath, str], None]


def check_gates(spec: ModelSpec, model_dir: Path, report: Report) -> None:
    """Check ``spec.checks`` of a completed ``spec`` whose folder is ``model_dir``;
    ``report(key_path, message)`` receives every problem."""
    accuracy, latency = spec.checks.accuracy, spec.checks.latency
    inputs = {tensor.name: tensor for tensor in spec.inputs}
    if accuracy is not None:
        served = [tensor.name for tensor in spec.outputs]
        for name in accuracy.outputs:
            if name not in served:
                report(
                    ("checks", "accuracy", "outputs", name),
                    f"the model serves no output {name!r}; its outputs are: "
                    f"{', '.join(map(repr, served))}",
                )
        for index, sample in enumerate(accuracy.samples):
            _check_sample(
                model_dir, sample, inputs, ("checks", "accuracy", "samples", index), report
            )
    if latency is not None:
        _check_latency(latency, spec.max_batch_size, inputs, report)
    generation = spec.checks.generation
    if generation is not None:
        key = ("checks", "generation", "samples")
        file = (model_dir / generation.samples).resolve()
        if not file.is_relative_to(model_dir.resolve()) or file.suffix != ".npz":
            report(key, f"{generation.samples!r}: give an .npz file inside the model folder")
        elif not file.is_file():
            report(key, f"{generation.samples!r} does not exist in the model folder; "
                        "convert again (`mmaas convert qwen2-vl` writes it)")  # fmt: skip


def _check_sample(
    model_dir: Path, sample: str, inputs: dict[str, InputSpec], path: KeyPath, report: Report
) -> None:
    file = (model_dir / sample).resolve()
    if Path(sample).is_absolute() or not file.is_relative_to(model_dir.resolve()):
        report(path, f"{sample!r} is outside the model folder; give a path relative to it")
        return
    if file.suffix not in SAMPLE_SUFFIXES:
        report(path, f"{sample!r} is not an .npz or .npy file; save samples with numpy.savez")
        return
    if not file.is_file():
        report(path, f"{sample!r} does not exist in the model folder")
        return
    try:
        arrays = sample_arrays(file, list(inputs))
    except (OSError, ValueError) as exc:
        report(path, f"{sample!r}: {exc}")
        return
    for name, array in arrays.items():
        tensor = inputs[name]
        problem = _array_problem(array, tensor)
        if problem:
            report(path, f"{sample!r}: input {name!r}: {problem}")


def _array_problem(array: np.ndarray, tensor: InputSpec) -> str | None:
    expected = to_numpy(tensor.datatype or "FP32")
    if tensor.datatype != "BYTES" and array.dtype != expected:
        return f"dtype {array.dtype}, the input is {tensor.datatype} ({expected})"
    return _shape_problem(tuple(array.shape), tensor)


def _shape_problem(shape: tuple[int, ...], tensor: InputSpec) -> str | None:
    low, high = tuple(tensor.min or ()), tuple(tensor.max or ())
    if len(shape) != len(low) or any(
        not lo <= dim <= hi for dim, lo, hi in zip(shape, low, high, strict=True)
    ):
        return (
            f"shape {list(shape)} is outside the optimization profile "
            f"(min {list(low)}, max {list(high)})"
        )
    return None


def _check_latency(
    latency: LatencySpec, max_batch_size: int, inputs: dict[str, InputSpec], report: Report
) -> None:
    batch = latency.batch
    if batch is not None and max_batch_size == 0:
        report(
            ("checks", "latency", "batch"),
            "the model has no batch axis (max_batch_size: "
            "0); give full shapes under checks.latency.shapes instead",
        )
    elif batch is not None and batch > max_batch_size:
        report(
            ("checks", "latency", "batch"),
            f"batch {batch} is above max_batch_size ({max_batch_size})",
        )
    for name, shape in latency.shapes.items():
        key: KeyPath = ("checks", "latency", "shapes", name)
        if name not in inputs:
            report(
                key,
                f"the model has no input {name!r}; its inputs are: {', '.join(map(repr, inputs))}",
            )
            continue
        problem = _shape_problem(tuple(shape), inputs[name])
        if problem:
            report(key, problem)
        elif batch is not None and shape and shape[0] != batch:
            report(
                key, f"axis 0 is {shape[0]} but checks.latency.batch is {batch}; drop one of them"
            )
