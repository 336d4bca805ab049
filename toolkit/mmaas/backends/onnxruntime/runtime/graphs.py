"""Shape-pinned sessions of ONNX Runtime's CUDA provider, each a CUDA graph when graphs are
on: one session per declared shape, made at start-up, that never sees another shape.

Why pinned: the CUDA provider's Conv (cuDNN frontend, cuDNN 9) keeps the execution plan of
the last input shape only, and builds a new one (``build_plans``, with the algorithm
search ``cudnn_conv_algo_search`` asks for) whenever the shape changes. Dynamic batching
makes a new batch size nearly every run, so one session shared by every batch size
rebuilt every Conv's plan on every run: measured on the H200, ppocr-det's executions took
61-173 ms instead of 5 (the "stall" of dynamic batching without CUDA graphs). A session
that only ever runs one shape builds its plans once.

Each pinned session owns device buffers of its exact input shapes (a request's rows are
copied into them: :mod:`~mmaas.backends.onnxruntime.runtime.gpu_engine`) and runs through
I/O binding. With CUDA graphs (``enable_cuda_graph=1``) its outputs are fixed device
buffers too (a graph replays at fixed addresses): the first two runs capture and replay
the graph. Without, ONNX Runtime allocates the outputs of each run on the device. One
session per graph: on the H200 one fp16 PP-OCRv4 det session holding graphs at batch 1, 4
and 8 failed its first replay after the third capture with ``CUDA failure 700: an illegal
memory access`` (the fp32 one did not), so graphs share no memory arena. A graph lives in
the provider's per-thread context: it is captured and replayed by one thread only (the
engine's worker), and a capture fails while any other CUDA work runs in the process
(``CUDA failure 900: operation not permitted when stream is capturing``), so start-up
makes every instance's sessions one after another before the server is ready.

A request whose shapes equal a pinned session's runs there; with a batch axis, a batch
of fewer rows (same other dims) is padded to the smallest pinned batch that holds it (as
Triton's TensorRT back end does with its CUDA graphs) and its rows are cut back out; any
other shape runs on the instance's general session.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnxruntime as ort

from mmaas.backends.onnxruntime.runtime.settings import Shapes

NO_GRAPH = "-1"


def run_options(graph_id: str | None) -> ort.RunOptions:
    """RunOptions logging warnings and errors only (the session itself logs verbosely
    while it is created); ``graph_id``: the ``gpu_graph_id`` of a session with CUDA graphs
    (``-1`` = run without a graph), None for a session without."""
    options = ort.RunOptions()
    options.log_severity_level = 2
    if graph_id is not None:
        options.add_run_config_entry("gpu_graph_id", graph_id)
    return options


@dataclass
class PinnedSession:
    """One session pinned to ``shapes`` (input name -> full shape) on ``device``: its
    device input buffers, its I/O binding, ``fixed`` output buffers (a CUDA graph's; None:
    allocated by each run) and the output ``dtypes`` (numpy)."""

    session: ort.InferenceSession
    device: str
    shapes: dict[str, tuple[int, ...]]
    inputs: dict[str, ort.OrtValue]
    fixed: dict[str, ort.OrtValue] | None
    dtypes: dict[str, np.dtype]
    binding: ort.IOBinding
    options: ort.RunOptions

    @property
    def graph(self) -> bool:
        """Whether it replays a CUDA graph."""
        return self.fixed is not None

    def run(self) -> dict[str, ort.OrtValue]:
        """Run (replay) once over the input buffers; the outputs by name, in device
        memory (a graph's fixed buffers: read them before the next run; else this run's
        own: the outputs are bound afresh, since a bound output is reused by the next)."""
        self.session.run_with_iobinding(self.binding, self.options)
        if self.fixed is not None:
            return self.fixed
        names = [o.name for o in self.session.get_outputs()]
        outputs = dict(zip(names, self.binding.get_outputs(), strict=True))
        for name in names:
            self.binding.bind_output(name, self.device)
        return outputs


def pin(
    session: ort.InferenceSession, feeds: Mapping[str, np.ndarray], device: str, graph: bool
) -> PinnedSession:
    """Pin ``session`` to the shapes of ``feeds`` (sample inputs) on ``device`` (ONNX
    Runtime's device name, ``cuda``): a plain run gives the output shapes (and makes cuDNN
    choose its algorithms for this shape), the buffers are allocated and bound, then with
    ``graph`` (a session made with ``enable_cuda_graph=1``) two bound runs capture and
    replay its graph, else one bound run. Call it from the thread that will run it.

    Raises:
        Exception: ONNX Runtime's own error (e.g. it refuses the graph capture).
    """
    names = [o.name for o in session.get_outputs()]
    learned = session.run(names, dict(feeds), run_options(NO_GRAPH if graph else None))
    binding = session.io_binding()
    inputs = {
        n: ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(a), device, 0)
        for n, a in feeds.items()
    }
    for name, value in inputs.items():
        binding.bind_ortvalue_input(name, value)
    fixed = None
    if graph:
        fixed = {
            n: ort.OrtValue.ortvalue_from_shape_and_type(v.shape, v.dtype, device, 0)
            for n, v in zip(names, learned, strict=True)
        }
        for name, value in fixed.items():
            binding.bind_ortvalue_output(name, value)
    else:
        for name in names:
            binding.bind_output(name, device)
    options = run_options("0" if graph else None)
    for _ in range(2 if graph else 1):  # capture, then one replay
        session.run_with_iobinding(binding, options)
    if not graph:
        for name in names:  # the warm-up's outputs are not the first request's
            binding.bind_output(name, device)
    dtypes = {n: v.dtype for n, v in zip(names, learned, strict=True)}
    shapes = {n: tuple(a.shape) for n, a in feeds.items()}
    return PinnedSession(session, device, shapes, inputs, fixed, dtypes, binding, options)


def match(
    pinned: Sequence[PinnedSession], shapes: Mapping[str, tuple[int, ...]], batch_axis: bool
) -> PinnedSession | None:
    """The pinned session a batch of input ``shapes`` runs on (module doc), or None.
    ``pinned`` are in ascending batch order."""
    for candidate in pinned:
        if candidate.shapes == dict(shapes):
            return candidate
    if not batch_axis or not shapes:
        return None
    rows = next(iter(shapes.values()))[0]
    for candidate in pinned:
        fits = set(candidate.shapes) == set(shapes) and all(
            candidate.shapes[name][1:] == shape[1:] and candidate.shapes[name][0] >= rows
            for name, shape in shapes.items()
        )
        if fits:
            return candidate
    return None


def order(shapes: Sequence[Shapes]) -> list[Shapes]:
    """Declared shapes by ascending batch (axis 0 of the first input)."""
    return sorted(shapes, key=_batch)


def _batch(shapes: Shapes) -> int:
    first = next(iter(shapes.values()), ())
    return first[0] if first else 0
