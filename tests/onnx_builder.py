"""Build small, valid ONNX models in tests (onnx.helper): odd names and dims on demand.

Each output is an ``Identity`` of an input, so the graphs also run in ONNX Runtime when
their shapes agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from mmaas.backends.onnxruntime.runtime.settings import OnnxRuntimeSettings
from mmaas.backends.tensorrt.builder.settings import TensorRTSettings
from mmaas.core.manifest import ModelInfo, TensorInfo

# One dim: an int (dim_value, may be 0 or -1 as some exporters write), a str (dim_param,
# any text) or None (neither).
Dim = int | str | None
Tensor = tuple[str, int, Sequence[Dim] | None]  # name, TensorProto elem type, dims (None: no shape)

FLOAT = TensorProto.FLOAT
# The engine settings of a model.yaml that leaves build.onnxruntime at its default.
ORT_SETTINGS = OnnxRuntimeSettings(graph_optimization_level="all")
TRT_SETTINGS = TensorRTSettings(  # and the TensorRT engine settings of model.yaml's defaults
    version="10.13",
    workspace_mib=2048,
    timing_cache=True,
    builder_optimization_level=3,
    hardware_compatibility_level="none",
    version_compatible=False,
    timing_run=True,
    timing_cache_verify=False,
    calibration_cache=None,
    tolerance_atol=0.02,
    tolerance_rtol=0.02,
)
OPSET = 17


def value_info(name: str, elem_type: int, dims: Sequence[Dim] | None) -> onnx.ValueInfoProto:
    """A tensor ValueInfo whose dims are set exactly as given (see :data:`Dim`)."""
    info = helper.make_tensor_value_info(name, elem_type, None)
    if dims is None:
        return info
    shape = info.type.tensor_type.shape
    shape.SetInParent()
    for dim in dims:
        entry = shape.dim.add()
        if isinstance(dim, int):
            entry.dim_value = dim
        elif isinstance(dim, str):
            entry.dim_param = dim
    return info


def onnx_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[onnx.ValueInfoProto],
    outputs: Sequence[onnx.ValueInfoProto],
    initializer: Sequence[onnx.TensorProto] = (),
    graph_name: str = "test",
) -> onnx.ModelProto:
    """A model of one graph (``nodes`` between ``inputs`` and ``outputs``), default opset
    :data:`OPSET`, IR version 8 (what ONNX Runtime and TensorRT 8+ read)."""
    graph = helper.make_graph(nodes, graph_name, inputs, outputs, initializer=initializer)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    return model


def make_onnx(
    path: Path,
    inputs: Sequence[Tensor],
    outputs: Sequence[Tensor] | None = None,
    weights_as_inputs: Sequence[str] = (),
) -> Path:
    """Write a model with ``inputs`` and ``outputs`` (default: ``<input>_out`` copies of
    every input) to ``path``. ``weights_as_inputs`` names initializers that are also
    listed as graph inputs, as old exporters did."""
    if outputs is None:
        outputs = [(f"{name}_out", kind, dims) for name, kind, dims in inputs]
    nodes = [
        helper.make_node("Identity", [inputs[index % len(inputs)][0]], [out[0]])
        for index, out in enumerate(outputs)
    ]
    weights = [
        numpy_helper.from_array(np.zeros((2,), np.float32), name) for name in weights_as_inputs
    ]
    model = onnx_model(
        nodes,
        [value_info(*tensor) for tensor in inputs]
        + [value_info(name, FLOAT, [2]) for name in weights_as_inputs],
        [value_info(*tensor) for tensor in outputs],
        weights,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


IMAGE_MODEL: list[Tensor] = [("x", FLOAT, ["N", 3, "H", "W"])]


EXTERNAL_INFO = ModelInfo(
    name="external",
    version="1",
    backend="onnxruntime",
    precision="fp32",
    max_batch_size=4,
    inputs=(TensorInfo("x", "FP32", (-1, 64), (1, 64), (2, 64), (4, 64)),),
    outputs=(TensorInfo("y", "FP32", (-1, 32)),),
)


def external_data_model(folder: Path) -> Path:
    """``folder/big.onnx``: y = relu(x @ w1 + b) @ w2 with FP32 x [N, 64], y [N, 32]; its
    weights (16 KiB + 8 KiB, above ONNX Runtime's 1 KiB external threshold) are saved
    as external data in ``folder/weights/big.bin`` (a nested location)."""
    rng = np.random.default_rng(7)
    weights = [
        numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), "b"),
        numpy_helper.from_array(rng.standard_normal((64, 32)).astype(np.float32), "w2"),
    ]
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w1"], ["h"]),
            helper.make_node("Add", ["h", "b"], ["hb"]),
            helper.make_node("Relu", ["hb"], ["r"]),
            helper.make_node("MatMul", ["r", "w2"], ["y"]),
        ],
        "external",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 32])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    (folder / "weights").mkdir(parents=True)
    path = folder / "big.onnx"
    onnx.save(
        model, str(path), save_as_external_data=True, location="weights/big.bin", size_threshold=0
    )
    return path


def branch_model(path: Path, rate: int = 16000, frame: int = 160) -> Path:
    """``path``: audio FP32 [1, L] and rate INT64 [1]; ``rate == 16000`` takes the branch
    that runs at any L (y = audio [1, L, 1]); any other rate the branch that reshapes to
    frames of ``frame`` samples (y [1, L / frame, frame]), which fails unless L is a
    multiple of ``frame``: a profile valid only on the right branch."""
    target = numpy_helper.from_array(np.array([rate], np.int64), "rate_16k")
    frames = numpy_helper.from_array(np.array([1, -1, frame], np.int64), "frames")
    axes = numpy_helper.from_array(np.array([2], np.int64), "axes")
    y = [helper.make_tensor_value_info("y", FLOAT, None)]
    then = helper.make_graph([helper.make_node("Unsqueeze", ["audio", "axes"], ["y"])], "t", [], y)
    other = helper.make_graph([helper.make_node("Reshape", ["audio", "frames"], ["y"])], "e", [], y)
    nodes = [
        helper.make_node("Equal", ["rate", "rate_16k"], ["same"]),
        helper.make_node("Squeeze", ["same"], ["cond"]),
        helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other),
    ]
    model = onnx_model(
        nodes,
        [value_info("audio", FLOAT, [1, "L"]), value_info("rate", TensorProto.INT64, [1])],
        [value_info("y", FLOAT, [1, "F", "S"])],
        [target, frames, axes],
    )
    onnx.save(model, str(path))
    return path


def bf16_model(path: Path) -> Path:
    """``path``: x BF16 [N, 4] -> y BF16 [N, 4] = x * x computed in FP32 (Cast both ways),
    and z FP32 [N, 4] = x as float32: BF16 in, BF16 and FP32 out."""
    bf16 = TensorProto.BFLOAT16
    nodes = [
        helper.make_node("Cast", ["x"], ["z"], to=FLOAT),
        helper.make_node("Mul", ["z", "z"], ["square"]),
        helper.make_node("Cast", ["square"], ["y"], to=bf16),
    ]
    model = onnx_model(
        nodes,
        [value_info("x", bf16, ["N", 4])],
        [value_info("y", bf16, ["N", 4]), value_info("z", FLOAT, ["N", 4])],
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def reflect_pad_model(path: Path, pad: int = 3) -> Path:
    """``path``: x FP32 [N, C, L] -> y = Relu(x) reflect-padded by ``pad`` on both ends of
    L: ONNX Runtime needs L > ``pad`` (L >= pad + 1) there."""
    pads = numpy_helper.from_array(np.array([0, 0, pad, 0, 0, pad], np.int64), "pads")
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Pad", ["r", "pads"], ["y"], mode="reflect"),
    ]
    model = onnx_model(
        nodes,
        [value_info("x", FLOAT, ["N", 2, "L"])],
        [value_info("y", FLOAT, ["N", 2, "P"])],
        [pads],
    )
    onnx.save(model, str(path))
    return path
