"""The CUDA graph request path's host side on the CPU provider: a :class:`CapturedGraph`
bound to CPU buffers stands in for the captured one (the capture itself needs a GPU: see
test_gpu.py), so matching a request to a graph, padding between captured batches, the
copies into the fixed buffers and the rows cut back out run for real here."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnxruntime as ort
import pytest

from mmaas.backends.onnxruntime.runtime import graphs
from mmaas.backends.onnxruntime.runtime.gpu import GpuEngine
from mmaas.core.manifest import ModelInfo, TensorInfo
from onnx_builder import FLOAT, make_onnx


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> ort.InferenceSession:
    path = tmp_path_factory.mktemp("m") / "identity.onnx"
    make_onnx(path, [("x", FLOAT, ["N", 4])], [("y", FLOAT, ["N", 4])])
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def cpu_graph(session: ort.InferenceSession, rows: int) -> graphs.CapturedGraph:
    """A graph's buffers and binding at batch ``rows``, on the CPU (no capture)."""
    feeds = {"x": np.zeros((rows, 4), np.float32)}
    outputs = session.run(None, feeds)
    inputs = {n: ort.OrtValue.ortvalue_from_numpy(a) for n, a in feeds.items()}
    bound = {
        o.name: ort.OrtValue.ortvalue_from_numpy(v.copy())
        for o, v in zip(session.get_outputs(), outputs, strict=True)
    }
    binding = session.io_binding()
    for name, value in inputs.items():
        binding.bind_ortvalue_input(name, value)
    for name, value in bound.items():
        binding.bind_ortvalue_output(name, value)
    staging = {n: np.zeros_like(a) for n, a in feeds.items()}
    return graphs.CapturedGraph(
        session, {"x": (rows, 4)}, inputs, bound, staging, binding, graphs.run_options("-1")
    )


def test_a_request_replays_its_shape_pads_to_the_next_batch_or_runs_without(session) -> None:
    captured = [cpu_graph(session, 1), cpu_graph(session, 4)]
    model = ModelInfo(
        "m",
        "1",
        "onnxruntime",
        "fp32",
        8,
        (TensorInfo("x", "FP32", (-1, 4), (1, 4), (1, 4), (8, 4)),),
        (TensorInfo("y", "FP32", (-1, 4)),),
    )
    engine = GpuEngine(session, model, ThreadPoolExecutor(1))
    engine.graphs = captured
    for rows in (1, 3, 4, 6):
        x = np.arange(rows * 4, dtype=np.float32).reshape(rows, 4)
        found = graphs.match(captured, {"x": x}, batch_axis=True)
        expected_graph = None if rows > 4 else captured[0 if rows == 1 else 1]
        assert (found[0] if found else None) is expected_graph
        out = engine.infer({"x": x}, ["y"])["y"]
        np.testing.assert_array_equal(out, session.run(["y"], {"x": x})[0])
        assert out.shape == (rows, 4)
    assert graphs.match(captured, {"x": np.zeros((2, 5), np.float32)}, batch_axis=True) is None
    assert graphs.match(captured, {"x": np.zeros((3, 4), np.float32)}, batch_axis=False) is None


def test_graph_shapes_are_ordered_by_batch() -> None:
    shapes = [{"x": (8, 3)}, {"x": (1, 3)}, {"x": (4, 3)}]
    assert [s["x"][0] for s in graphs.order(shapes)] == [1, 4, 8]
