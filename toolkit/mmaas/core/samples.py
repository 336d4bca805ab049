"""Deterministic sample inputs at a profile point (min, opt or max shapes).

Used by the build's profile check, the accuracy and latency gates, the runtime's warm-up
and the benchmarks, so that all of them feed the engine the same kind of data: an input's
own sample values where model.yaml gives them (:mod:`mmaas.core.sample_values`), else
random data of its datatype.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mmaas.core.datatypes import is_floating, to_numpy
from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.core.profile import POINTS, ProfilePoint

__all__ = ["POINTS", "ProfilePoint", "profile_shape", "sample_arrays", "sample_inputs"]


def profile_shape(tensor: TensorInfo, point: ProfilePoint) -> tuple[int, ...]:
    """The input's shape at ``point``; a static input without a profile uses its shape."""
    shape = getattr(tensor, point)
    return tuple(shape if shape is not None else tensor.shape)


def sample_inputs(model: ModelInfo, point: ProfilePoint, seed: int = 0) -> dict[str, np.ndarray]:
    """One array per input at the ``point`` shapes: the input's sample values when it has
    them, else floats (BF16 included) uniform in [0, 1), integers in [0, 8), booleans
    random, BYTES as ``b"sample"``; the same ``seed`` gives the same data.

    Raises:
        InputError: a sample value does not fit its input's datatype.
    """
    rng = np.random.default_rng(seed)
    arrays: dict[str, np.ndarray] = {}
    for tensor in model.inputs:
        shape = profile_shape(tensor, point)
        dtype = to_numpy(tensor.datatype)
        if tensor.sample_values is not None:
            what = f"input {tensor.name!r}: sample_values"
            arrays[tensor.name] = tensor.sample_values.draw(shape, tensor.datatype, rng, what)
        elif tensor.datatype == "BYTES":
            arrays[tensor.name] = np.full(shape, b"sample", dtype=object)
        elif is_floating(dtype):
            arrays[tensor.name] = rng.random(shape, dtype=np.float32).astype(dtype)
        elif dtype.kind == "b":
            arrays[tensor.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            arrays[tensor.name] = rng.integers(0, 8, shape).astype(dtype)
    return arrays


def sample_arrays(path: Path, input_names: Sequence[str]) -> dict[str, np.ndarray]:
    """The arrays of one sample file: ``.npz`` by input name, ``.npy`` for the single input.

    Raises:
        ValueError: unreadable file, an ``.npy`` for a model with several inputs, or an
            ``.npz`` whose names differ from the inputs (says which are missing or extra).
        OSError: the file cannot be read.
    """
    if path.suffix == ".npy":
        if len(input_names) != 1:
            raise ValueError(
                f"an .npy file holds one array, the model has {len(input_names)} "
                "inputs; save them with numpy.savez(path, **{name: array})"
            )
        return {input_names[0]: np.load(path, allow_pickle=False)}
    with np.load(path, allow_pickle=False) as archive:
        arrays = {name: archive[name] for name in archive.files}
    missing = [name for name in input_names if name not in arrays]
    extra = [name for name in arrays if name not in input_names]
    if missing or extra:
        raise ValueError(
            f"its arrays must be named after the inputs: missing {missing}, unknown {extra}"
        )
    return arrays
