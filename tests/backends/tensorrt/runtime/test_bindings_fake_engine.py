"""The TensorRT engine wrapper's cast into its bindings and the served signature, with the
engine boundary FAKED (no TensorRT here): ``FakeEngine`` answers the ``trt.ICudaEngine``
calls the wrapper makes (num_io_tensors, get_tensor_name, get_tensor_dtype(...).name)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from mmaas.backends.tensorrt.runtime.bindings import read_bindings, served_signature, to_binding
from mmaas.core.errors import BuildError, InputError
from mmaas.core.manifest import ModelInfo, TensorInfo


@dataclass(frozen=True)
class FakeDataType:
    name: str  # as trt.DataType.<NAME>.name


class FakeEngine:
    """The slice of trt.ICudaEngine that read_bindings uses."""

    def __init__(self, bindings: dict[str, str]) -> None:
        self.bindings = bindings
        self.num_io_tensors = len(bindings)

    def get_tensor_name(self, index: int) -> str:
        return list(self.bindings)[index]

    def get_tensor_dtype(self, name: str) -> FakeDataType:
        return FakeDataType(self.bindings[name])


MODEL = ModelInfo(
    name="m",
    version="1",
    backend="tensorrt",
    precision="fp16",
    max_batch_size=0,
    inputs=(TensorInfo("input_ids", "INT64", (1, -1), (1, 1), (1, 8), (1, 16)),),
    outputs=(TensorInfo("logits", "FP32", (1, -1)),),
)


def test_fake_engine_int64_into_an_int32_binding_refuses_what_would_wrap() -> None:
    datatypes = read_bindings(FakeEngine({"input_ids": "INT32", "logits": "FLOAT"}))
    ids = np.array([[5, 2**40 + 5]], np.int64)  # 2**40 + 5 as int32 is 5
    with pytest.raises(InputError, match=r"^input 'input_ids': value 1099511627781 at index"):
        to_binding("input_ids", ids, datatypes["input_ids"])
    fits = to_binding("input_ids", np.array([[5, 2**31 - 1]], np.int64), datatypes["input_ids"])
    assert fits.dtype == np.int32 and fits.flags.c_contiguous
    assert fits.tolist() == [[5, 2**31 - 1]]


def test_fake_engine_metadata_describes_the_real_bindings() -> None:
    bindings = read_bindings(FakeEngine({"input_ids": "INT32", "logits": "HALF"}))
    served = served_signature(MODEL, bindings)
    assert [t.datatype for t in served.inputs] == ["INT32"]
    assert [t.datatype for t in served.outputs] == ["FP16"]
    assert served.inputs[0].max == (1, 16)  # only the datatypes change


def test_fake_engine_bindings_kserve_cannot_carry_or_lacks_are_build_errors() -> None:
    with pytest.raises(BuildError, match="'logits' is bound as TensorRT FP8"):
        read_bindings(FakeEngine({"input_ids": "INT32", "logits": "FP8"}))
    with pytest.raises(BuildError, match="no binding for 'logits'"):
        served_signature(MODEL, {"input_ids": "INT32"})
