"""The ONNX Runtime back end's bound-engine capability on the CPU provider (the same code the
CUDA provider runs, arrays in host memory): arrays allocated once and read back, row views
bound in place, a run whose output is its input's very buffer (a state updated in place),
engine-allocated outputs, a "captured" run replayed (CPU: the binding run again, on its own
thread only) and the memory figure."""

from __future__ import annotations

import threading

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from mmaas.backends.bound import bound_engine
from mmaas.backends.onnxruntime.runtime import OnnxRuntimeEngine


@pytest.fixture
def engine() -> OnnxRuntimeEngine:
    """state' = state + delta (broadcast over rows); total = sum of state' per row."""
    nodes = [helper.make_node("Add", ["state", "delta"], ["next"]),
             helper.make_node("ReduceSum", ["next"], ["total"], keepdims=0)]  # fmt: skip
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("state", TensorProto.FLOAT, ["rows", 4]),
         helper.make_tensor_value_info("delta", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("next", TensorProto.FLOAT, ["rows", 4]),
         helper.make_tensor_value_info("total", TensorProto.FLOAT, [])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return OnnxRuntimeEngine(session)


def test_a_state_is_updated_in_place_through_row_views(engine) -> None:
    bound = bound_engine(engine)
    assert bound is not None and (bound.device, bound.graphs) == ("cpu", False)
    state = bound.allocate((3, 4), "FP32")
    state.write(np.arange(12, dtype=np.float32).reshape(3, 4))
    rows = state.rows(1, 3)  # rows 1 and 2, bound as input and output at once
    found = bound.run({"state": rows, "delta": np.ones((1, 4), np.float32)},
                      {"next": rows, "total": None})  # fmt: skip
    after = state.read()
    assert after[0].tolist() == [0, 1, 2, 3]  # row 0 untouched
    assert after[1:].tolist() == (np.arange(4, 12).reshape(2, 4) + 1).tolist()
    assert float(found["total"].read()) == float(after[1:].sum())
    assert set(found) == {"total"}  # only the outputs it allocated come back
    with pytest.raises(ValueError, match="a row view is not read"):
        rows.read()
    with pytest.raises(ValueError, match="rows 2:5 of an array of 3"):
        state.rows(2, 5)


def test_a_captured_run_replays_on_its_own_thread_only(engine) -> None:
    bound = bound_engine(engine)
    state, delta = bound.allocate((2, 4), "FP32"), bound.allocate((1, 4), "FP32")
    total = bound.allocate((), "FP32")
    state.write(np.zeros((2, 4), np.float32))
    delta.write(np.full((1, 4), 0.5, np.float32))
    graph = bound.capture({"state": state, "delta": delta}, {"next": state, "total": total})
    graph.replay()  # the capture ran it once: two runs so far
    assert state.read().tolist() == [[1.0] * 4] * 2 and float(total.read()) == 8.0
    delta.write(np.full((1, 4), 2.0, np.float32))  # refill an input, replay
    graph.replay()
    assert float(total.read()) == 24.0
    failures: list[BaseException] = []

    def elsewhere() -> None:
        try:
            graph.replay()
        except RuntimeError as exc:
            failures.append(exc)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    assert failures and "the thread that captured it" in str(failures[0])


def test_the_free_memory_is_the_hosts(engine) -> None:
    assert bound_engine(engine).free_memory() > 2**20
