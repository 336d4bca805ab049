"""The checks: section against the ONNX signature and the sample files' contents (the name
and path rules are fixture cases: tests/fixtures/specs/checks_mismatch)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mmaas.build.spec_checks import host_checks
from mmaas.core.errors import SpecError
from mmaas.spec.load import load_spec
from onnx_builder import FLOAT, IMAGE_MODEL, make_onnx

SPEC = """name: m
version: "1"
source: {path: model.onnx}
max_batch_size: 4
inputs:
  - {name: x, min: [1, 3, 8, 8], opt: [2, 3, 8, 8], max: [4, 3, 16, 16]}
checks:
  accuracy:
    min_cosine: 0.999
    samples: [%s]
  latency: {p99_ms: 5, batch: 2, shapes: {x: [2, 3, 16, 16]}}
"""


def folder_with(
    tmp_path: Path, samples: dict[str, dict[str, np.ndarray] | np.ndarray], inputs=IMAGE_MODEL
) -> Path:
    make_onnx(tmp_path / "model.onnx", inputs)
    for name, arrays in samples.items():
        if isinstance(arrays, dict):
            np.savez(tmp_path / name, **arrays)
        else:
            np.save(tmp_path / name, arrays)
    (tmp_path / "model.yaml").write_text(SPEC % ", ".join(samples))
    return tmp_path


def problems(folder: Path) -> list[str]:
    with pytest.raises(SpecError) as caught:
        load_spec(folder, checks=host_checks())
    return [f"{p.key_path}: {p.message}" for p in caught.value.problems]


def test_good_samples_and_latency_shapes_load(tmp_path: Path) -> None:
    good = np.zeros((2, 3, 8, 8), np.float32)
    spec = load_spec(
        folder_with(tmp_path, {"a.npz": {"x": good}, "b.npy": good}), checks=host_checks()
    ).spec
    assert spec.checks.accuracy.samples == ["a.npz", "b.npy"]
    assert spec.checks.latency.shapes == {"x": (2, 3, 16, 16)}


def test_sample_contents_are_checked_against_the_inputs(tmp_path: Path) -> None:
    folder = folder_with(
        tmp_path,
        {
            "dtype.npz": {"x": np.zeros((1, 3, 8, 8), np.float64)},
            "shape.npz": {"x": np.zeros((8, 3, 8, 8), np.float32)},
            "names.npz": {"image": np.zeros((1, 3, 8, 8), np.float32)},
        },
    )
    assert problems(folder) == [
        "checks.accuracy.samples[0]: 'dtype.npz': input 'x': dtype float64, the input is FP32 "
        "(float32)",
        "checks.accuracy.samples[1]: 'shape.npz': input 'x': shape [8, 3, 8, 8] is outside the "
        "optimization profile (min [1, 3, 8, 8], max [4, 3, 16, 16])",
        "checks.accuracy.samples[2]: 'names.npz': its arrays must be named after the inputs: "
        "missing ['x'], unknown ['image']",
    ]


def test_npy_needs_a_single_input_model(tmp_path: Path) -> None:
    two = [("x", FLOAT, ["N", 3, "H", "W"]), ("y", FLOAT, ["N", 3, 8, 8])]
    folder = folder_with(tmp_path, {"a.npy": np.zeros((1, 3, 8, 8), np.float32)}, two)
    (folder / "model.yaml").write_text(
        SPEC.replace(
            "  - {name: x,",
            "  - {name: y, min: [1, 3, 8, 8], opt: [1, 3, 8, 8], max: [4, 3, 8, 8]}\n  - {name: x,",
        )
        % "a.npy"
    )
    assert problems(folder) == [
        "checks.accuracy.samples[0]: 'a.npy': an .npy file holds one array, the model has 2 "
        "inputs; save them with numpy.savez(path, **{name: array})"
    ]
