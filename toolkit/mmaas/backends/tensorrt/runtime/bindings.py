"""A TensorRT engine's I/O bindings as KServe v2 datatypes, and the checked cast into them.

Pure (no TensorRT import), so the rules are tested where TensorRT cannot run. TensorRT
names its tensor types ``trt.DataType.<NAME>`` (FLOAT, HALF, BF16, INT8, INT32, INT64,
UINT8, BOOL; FP8/INT4/FP4 only inside a network): :data:`KSERVE_BY_TRT` maps them. An
ONNX INT64 input is often bound as INT32 (TensorRT 8 has no INT64 I/O, and parsers narrow
it), so the wrapper's cast of a request into the binding is a narrowing one: it goes
through :func:`mmaas.core.datatypes.cast_checked` and a value that does not fit (2**40 + 5
into INT32) is refused naming the input, never wrapped. :func:`served_signature` makes the
manifest (and so ModelMetadata) describe the bindings the engine really has.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from mmaas.core.datatypes import cast_checked, to_numpy
from mmaas.core.errors import BuildError
from mmaas.core.manifest import ModelInfo

# trt.DataType name -> KServe v2 datatype of an engine's input or output binding.
KSERVE_BY_TRT: dict[str, str] = {
    "FLOAT": "FP32",
    "HALF": "FP16",
    "BF16": "BF16",
    "INT8": "INT8",
    "INT32": "INT32",
    "INT64": "INT64",
    "UINT8": "UINT8",
    "BOOL": "BOOL",
}


def binding_datatype(trt_name: str, tensor: str) -> str:
    """The KServe v2 datatype of a binding whose ``trt.DataType`` is named ``trt_name``.

    Raises:
        BuildError: a type no KServe v2 datatype carries (naming the tensor).
    """
    try:
        return KSERVE_BY_TRT[trt_name]
    except KeyError:
        raise BuildError(
            f"engine tensor {tensor!r} is bound as TensorRT {trt_name}, which KServe v2 "
            f"cannot carry; export it as one of {', '.join(KSERVE_BY_TRT)}"
        ) from None


def to_binding(name: str, array: np.ndarray, datatype: str) -> np.ndarray:
    """``array`` (a request's input ``name``) as a C-contiguous array of the binding's
    ``datatype``: a widening or equal cast is free; a narrowing one refuses values the
    binding cannot hold.

    Raises:
        InputError: naming the input and the first value that does not fit.
    """
    return np.ascontiguousarray(cast_checked(array, to_numpy(datatype), f"input {name!r}"))


def served_signature(model: ModelInfo, bindings: Mapping[str, str]) -> ModelInfo:
    """``model`` with each tensor's datatype replaced by its engine binding's
    (``bindings``: tensor name -> KServe v2 datatype), so ModelMetadata tells clients what
    the engine takes.

    Raises:
        BuildError: the engine lacks a tensor of the signature (naming it).
    """
    missing = [t.name for t in (*model.inputs, *model.outputs) if t.name not in bindings]
    if missing:
        raise BuildError(
            f"the engine has no binding for {', '.join(map(repr, missing))}; its "
            f"bindings are {', '.join(map(repr, bindings))}"
        )
    return replace(
        model,
        inputs=tuple(replace(t, datatype=bindings[t.name]) for t in model.inputs),
        outputs=tuple(replace(t, datatype=bindings[t.name]) for t in model.outputs),
    )


def read_bindings(engine: Any) -> dict[str, str]:
    """``{tensor name: KServe v2 datatype}`` of every I/O tensor of a deserialized
    ``trt.ICudaEngine`` (``num_io_tensors``, ``get_tensor_name``, ``get_tensor_dtype``:
    TensorRT 8.5+).

    Raises:
        BuildError: a binding of a type KServe v2 cannot carry.
    """
    names = (engine.get_tensor_name(i) for i in range(engine.num_io_tensors))
    return {name: binding_datatype(engine.get_tensor_dtype(name).name, name) for name in names}
