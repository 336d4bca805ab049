"""A GPU instance's request path (:mod:`mmaas.backends.onnxruntime.runtime.gpu_engine`) on the
CPU provider: pinned sessions bound to CPU buffers stand in for the GPU's (a CUDA graph's
capture needs a GPU: see test_gpu.py; "fixed" buffers are a graph's), and the host-memory
stand-in of the CUDA runtime (tests/host_cuda.py) moves the bytes. So matching a batch to
a pinned session, padding between pinned batches, each request's rows copied straight
into the session's buffers and cut back out, device inputs bound in place, outputs kept
in device memory for device requests (copied out of a graph's buffers before the next
replay) run for real here."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnxruntime as ort
import pytest

from host_cuda import HostCuda
from mmaas.backends import BatchingEngine, Device
from mmaas.backends.onnxruntime.runtime import graphs
from mmaas.backends.onnxruntime.runtime.gpu_engine import GpuEngine
from mmaas.core.cuda import DeviceArray
from mmaas.core.manifest import ModelInfo, TensorInfo
from onnx_builder import FLOAT, make_onnx

MODEL = ModelInfo(
    "m",
    "1",
    "onnxruntime",
    "fp32",
    8,
    (TensorInfo("x", "FP32", (-1, 4), (1, 4), (1, 4), (8, 4)),),
    (TensorInfo("y", "FP32", (-1, 4)),),
)


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> str:
    onnx = tmp_path_factory.mktemp("m") / "identity.onnx"
    make_onnx(onnx, [("x", FLOAT, ["N", 4])], [("y", FLOAT, ["N", 4])])
    return str(onnx)


def engine_on_cpu(path: str, fixed: bool) -> GpuEngine:
    """A GPU engine on the CPU provider, pinned at batch 1 and 4 (``fixed``: a graph's
    fixed output buffers), taking device (stand-in) inputs."""
    engine = GpuEngine(
        ort.InferenceSession(path, providers=["CPUExecutionProvider"]),
        MODEL,
        ThreadPoolExecutor(1),
        device="cpu",
    )
    engine.device_inputs = True  # the stand-in's "device" memory is host memory
    for rows in (1, 4):
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        feeds = {"x": np.zeros((rows, 4), np.float32)}
        engine.pinned.append(
            engine.worker.submit(graphs.pin, session, feeds, "cpu", fixed).result()
        )
    return engine


def rows(count: int, start: int = 0) -> np.ndarray:
    return np.arange(start * 4, (start + count) * 4, dtype=np.float32).reshape(count, 4)


def on_device(array: np.ndarray) -> DeviceArray:
    return DeviceArray(array.ctypes.data, array.shape, array.dtype, 0, array)


@pytest.mark.parametrize("fixed", [True, False])
def test_batches_run_pinned_padded_or_general_each_request_gets_its_rows(
    path: str, fixed: bool, host_cuda: HostCuda
) -> None:
    engine = engine_on_cpu(path, fixed)
    assert isinstance(engine, BatchingEngine) and engine.runs_on == Device("CPU")
    one, four = engine.pinned
    for count, expected in ((1, one), (3, four), (4, four), (6, None)):
        assert graphs.match(engine.pinned, {"x": (count, 4)}, batch_axis=True) is expected
        out = engine.infer({"x": rows(count)}, ["y"])["y"]
        np.testing.assert_array_equal(out, rows(count))
    assert graphs.match(engine.pinned, {"x": (2, 5)}, batch_axis=True) is None
    assert graphs.match(engine.pinned, {"x": (3, 4)}, batch_axis=False) is None
    batch = engine.infer_batch([{"x": rows(1)}, {"x": rows(2, 1)}], ["y"])  # padded to 4
    assert [o["y"].tolist() for o in batch.outputs] == [rows(1).tolist(), rows(2, 1).tolist()]
    assert min(batch.input_ns, batch.infer_ns, batch.output_ns) >= 0
    batch = engine.infer_batch([{"x": rows(3)}, {"x": rows(3, 3)}], ["y"])  # 6: general
    assert [o["y"].tolist() for o in batch.outputs] == [rows(3).tolist(), rows(3, 3).tolist()]


@pytest.mark.parametrize("fixed", [True, False])
def test_device_requests_stay_in_device_memory_next_to_host_ones(
    path: str, fixed: bool, host_cuda: HostCuda
) -> None:
    engine = engine_on_cpu(path, fixed)
    device_in = rows(1, 7)
    batch = engine.infer_batch([{"x": on_device(device_in)}, {"x": rows(2, 1)}], ["y"])
    kept, host = batch.outputs[0]["y"], batch.outputs[1]["y"]
    assert isinstance(kept, DeviceArray) and isinstance(host, np.ndarray)
    assert kept.shape == (1, 4) and host.shape == (2, 4)
    buffers = [v.data_ptr() for p in engine.pinned for v in (p.fixed or {}).values()]
    assert (kept.pointer in buffers) is False  # a graph's buffer is copied out first
    engine.infer({"x": rows(4, 20)}, ["y"])  # the next run overwrites the pinned outputs
    np.testing.assert_array_equal(kept.to_host(), device_in)
    np.testing.assert_array_equal(host, rows(2, 1))


def test_device_inputs_at_no_pinned_shape_are_bound_in_place(
    path: str, host_cuda: HostCuda
) -> None:
    engine = engine_on_cpu(path, fixed=True)
    six = rows(6)
    out = engine.infer({"x": on_device(six)}, ["y"])["y"]
    assert isinstance(out, DeviceArray) and out.shape == (6, 4)
    np.testing.assert_array_equal(np.asarray(out), six)
    assert host_cuda.copies == 1  # the result read back here; nothing copied in
    parts = [{"x": on_device(rows(3))}, {"x": rows(3, 3)}]  # stacked into one new buffer
    batch = engine.infer_batch(parts, ["y"])
    np.testing.assert_array_equal(np.asarray(batch.outputs[0]["y"]), rows(3))
    np.testing.assert_array_equal(batch.outputs[1]["y"], rows(3, 3))


def test_calls_from_the_worker_run_inline_others_are_handed_over(
    path: str, host_cuda: HostCuda
) -> None:
    engine = engine_on_cpu(path, fixed=True)
    seen: list[int] = []

    def on_worker() -> np.ndarray:
        seen.append(threading.get_ident())
        return engine.infer_batch([{"x": rows(1)}], ["y"]).outputs[0]["y"]

    np.testing.assert_array_equal(engine.executor.submit(on_worker).result(), rows(1))
    assert seen and seen[0] != threading.get_ident()
    np.testing.assert_array_equal(engine.infer({"x": rows(1)}, ["y"])["y"], rows(1))


def test_an_output_without_a_batch_axis_is_refused_when_batched(host_cuda: HostCuda) -> None:
    model = ModelInfo(
        "m", "1", "onnxruntime", "fp32", 8,
        (TensorInfo("x", "FP32", (-1, 4), (1, 4), (1, 4), (8, 4)),),
        (TensorInfo("y", "FP32", (4,)),),
    )  # fmt: skip
    engine = GpuEngine(
        ort.InferenceSession(_sum_rows(), providers=["CPUExecutionProvider"]),
        model,
        ThreadPoolExecutor(1),
        device="cpu",
    )
    engine.device_inputs = True
    with pytest.raises(ValueError, match="it has no batch axis"):
        engine.infer_batch([{"x": on_device(rows(2))}, {"x": on_device(rows(3))}], ["y"])


def _sum_rows() -> bytes:
    """A graph whose output has no batch axis (the rows' sum)."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)],
        "sum",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [helper.make_tensor("axes", TensorProto.INT64, [1], [0])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model.SerializeToString()
