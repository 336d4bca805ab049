"""CUDA graphs of ONNX Runtime's CUDA provider: one per declared shape, captured at start-up.

ONNX Runtime's CUDA provider (``enable_cuda_graph=1``) captures a graph on the first
``run_with_iobinding`` and replays it afterwards. Each graph has a session of its own: one
session can hold several graphs (``RunOptions`` config ``gpu_graph_id``), but on the H200
the fp16 PP-OCRv4 det session holding graphs at batch 1, 4 and 8 failed its first replay
after the third capture with ``CUDA failure 700: an illegal memory access`` (the fp32 one
did not), so graphs share no memory arena. The inputs and outputs must stay at fixed device
addresses, so each graph owns
device OrtValues of its exact shapes, and a request is copied into them
(``OrtValue.update_inplace``: one host-to-device copy per input), replayed, and its outputs
copied back once (``OrtValue.numpy``). The graph lives in the provider's per-thread
context: a graph is captured and replayed by one thread only (the engine's worker), and
a capture fails while any other CUDA work runs in the process (measured on the H200:
``CUDA failure 900: operation not permitted when stream is capturing``), so start-up
captures every instance's graphs one after another before the server is ready.

A request whose shapes equal a graph's replays it; with a batch axis, a request of fewer
rows (same other dims) is padded to the smallest captured batch that holds it (as
Triton's TensorRT back end does with its CUDA graphs) and its rows are cut back out; any
other shape runs on the instance's session without graphs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnxruntime as ort

from mmaas.backends.onnxruntime.runtime.settings import Shapes

NO_GRAPH = "-1"


def run_options(graph_id: str) -> ort.RunOptions:
    """RunOptions for graph ``graph_id`` (``-1`` = run without a graph), logging warnings
    and errors only (the session itself logs verbosely while it is created)."""
    options = ort.RunOptions()
    options.log_severity_level = 2
    options.add_run_config_entry("gpu_graph_id", graph_id)
    return options


@dataclass
class CapturedGraph:
    """One captured graph: its session, input shapes, device buffers and binding."""

    session: ort.InferenceSession
    shapes: dict[str, tuple[int, ...]]
    inputs: dict[str, ort.OrtValue]
    outputs: dict[str, ort.OrtValue]
    staging: dict[str, np.ndarray]  # host arrays for padded requests (batch models)
    binding: ort.IOBinding
    options: ort.RunOptions

    def replay(
        self, arrays: Mapping[str, np.ndarray], rows: int | None, names: Sequence[str]
    ) -> dict[str, np.ndarray]:
        """Copy ``arrays`` in (padded to the graph's batch when ``rows`` is smaller), replay,
        and return the named outputs (their first ``rows`` rows)."""
        for name, array in arrays.items():
            if rows is not None and array.shape[0] != self.shapes[name][0]:
                staged = self.staging[name]
                staged[: array.shape[0]] = array
                array = staged
            self.inputs[name].update_inplace(np.ascontiguousarray(array))
        self.session.run_with_iobinding(self.binding, self.options)
        out = {name: self.outputs[name].numpy() for name in names}
        if rows is not None:
            out = {name: value[:rows] for name, value in out.items()}
        return out


def capture(session: ort.InferenceSession, feeds: Mapping[str, np.ndarray]) -> CapturedGraph:
    """Capture the graph of ``session`` (created with ``enable_cuda_graph=1``) at the
    shapes of ``feeds`` (sample inputs): a run without a graph gives the output shapes,
    device buffers are allocated, then two bound runs capture and replay it. Call it from
    the thread that will replay it.

    Raises:
        Exception: ONNX Runtime's own error when the graph cannot be captured.
    """
    names = [o.name for o in session.get_outputs()]
    learned = session.run(names, dict(feeds), run_options(NO_GRAPH))
    binding = session.io_binding()
    inputs = {
        n: ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(a), "cuda", 0)
        for n, a in feeds.items()
    }
    outputs = {
        n: ort.OrtValue.ortvalue_from_shape_and_type(v.shape, v.dtype, "cuda", 0)
        for n, v in zip(names, learned, strict=True)
    }
    for name, value in inputs.items():
        binding.bind_ortvalue_input(name, value)
    for name, value in outputs.items():
        binding.bind_ortvalue_output(name, value)
    options = run_options("0")
    for _ in range(2):  # capture, then one replay
        session.run_with_iobinding(binding, options)
    staging = {n: np.zeros_like(a) for n, a in feeds.items()}
    shapes = {n: tuple(a.shape) for n, a in feeds.items()}
    return CapturedGraph(session, shapes, inputs, outputs, staging, binding, options)


def match(
    graphs: Sequence[CapturedGraph], arrays: Mapping[str, np.ndarray], batch_axis: bool
) -> tuple[CapturedGraph, int | None] | None:
    """The graph a request replays and the rows to keep (None: all, no padding), or None
    when no captured graph fits (module doc). ``graphs`` are in ascending batch order."""
    shapes = {name: tuple(array.shape) for name, array in arrays.items()}
    for graph in graphs:
        if graph.shapes == shapes:
            return graph, None
    if not batch_axis or not shapes:
        return None
    rows = next(iter(shapes.values()))[0]
    for graph in graphs:
        fits = all(
            name in graph.shapes
            and graph.shapes[name][1:] == shape[1:]
            and graph.shapes[name][0] >= rows
            for name, shape in shapes.items()
        )
        if fits and set(graph.shapes) == set(shapes):
            return graph, rows
    return None


def order(shapes: Sequence[Shapes]) -> list[Shapes]:
    """Declared graph shapes by ascending batch (axis 0 of the first input)."""
    return sorted(shapes, key=_batch)


def _batch(shapes: Shapes) -> int:
    first = next(iter(shapes.values()), ())
    return first[0] if first else 0
