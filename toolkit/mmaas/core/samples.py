"""Deterministic sample inputs at a profile point (min, opt or max shapes).

Used by the build's profile check, the runtime's warm-up and the benchmarks, so that all
three feed the engine the same kind of data.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from mmaas.core.datatypes import to_numpy
from mmaas.core.manifest import ModelInfo, TensorInfo

ProfilePoint = Literal["min", "opt", "max"]
POINTS: tuple[ProfilePoint, ...] = ("min", "opt", "max")


def profile_shape(tensor: TensorInfo, point: ProfilePoint) -> tuple[int, ...]:
    """The input's shape at ``point``; a static input without a profile uses its shape."""
    shape = getattr(tensor, point)
    return tuple(shape if shape is not None else tensor.shape)


def sample_inputs(model: ModelInfo, point: ProfilePoint, seed: int = 0) -> dict[str, np.ndarray]:
    """One array per input at the ``point`` shapes: floats uniform in [0, 1), integers in
    [0, 8), booleans random, BYTES as ``b"sample"``; the same ``seed`` gives the same data."""
    rng = np.random.default_rng(seed)
    arrays: dict[str, np.ndarray] = {}
    for tensor in model.inputs:
        shape = profile_shape(tensor, point)
        dtype = to_numpy(tensor.datatype)
        if tensor.datatype == "BYTES":
            arrays[tensor.name] = np.full(shape, b"sample", dtype=object)
        elif dtype.kind == "f":
            arrays[tensor.name] = rng.random(shape, dtype=np.float32).astype(dtype)
        elif dtype.kind == "b":
            arrays[tensor.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            arrays[tensor.name] = rng.integers(0, 8, shape).astype(dtype)
    return arrays
