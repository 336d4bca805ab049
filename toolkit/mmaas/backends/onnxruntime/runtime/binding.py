"""In-place runs of an ONNX Runtime session (:class:`mmaas.backends.bound.BoundEngine`), on the CPU
and CUDA providers alike: arrays allocated once where the session computes, bound by address
through I/O binding (``IOBinding.bind_input/bind_output(name, device, 0, type, shape,
address)``), so a bound output may be the very buffer of a bound input (a KV cache written in
place) and a run copies nothing through the host but the host arrays it is given.

Arrays: on the CPU a numpy array (its address bound), on CUDA an ``OrtValue`` made by
``ortvalue_from_shape_and_type`` (BF16 by its ONNX type number, which numpy lacks); a row
view is the owner's address plus the rows before it, bound with its own shape.

Graphs: on CUDA a capture runs the binding twice on a session created with
``enable_cuda_graph=1`` under RunOptions ``gpu_graph_id`` = a number of its own (ONNX
Runtime's first run of an id allocates, the next captures and replays it); ``replay`` runs the
same binding under that id, which replays the graph without touching the host. One graph
session holds every graph, on the thread that captured them (the provider keeps the graphs
per thread). On the CPU a "graph" is the binding itself, run again: the same code path
without the capture.
"""

from __future__ import annotations

import ctypes
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from mmaas.core.datatypes import element_size, to_numpy

ONNX_BFLOAT16 = 16
NO_GRAPH = "-1"


def _element(datatype: str) -> Any:
    """The element type I/O binding takes: a numpy type, or BF16's ONNX type number."""
    return ONNX_BFLOAT16 if datatype == "BF16" else to_numpy(datatype).type


@dataclass
class OrtArray:
    """One array on ``device`` (``"cpu"`` or ``"cuda"``); ``owner`` holds the memory (a numpy
    array or an OrtValue; None for a row view, which only binds)."""

    shape: tuple[int, ...]
    datatype: str
    device: str
    address: int
    owner: Any = None

    def rows(self, start: int, stop: int) -> OrtArray:
        """Rows ``start:stop`` of axis 0, in place (binding only)."""
        if not 0 <= start <= stop <= self.shape[0]:
            raise ValueError(f"rows {start}:{stop} of an array of {self.shape[0]}")
        row = math.prod(self.shape[1:]) * element_size(self.datatype)
        view = OrtArray((stop - start, *self.shape[1:]), self.datatype, self.device, 0)
        view.address = self.address + start * row
        return view

    def write(self, array: np.ndarray) -> None:
        """Copy a host array of this shape in."""
        if tuple(array.shape) != self.shape or self.owner is None:
            raise ValueError(f"cannot write an array of {array.shape} into {self.shape}")
        if isinstance(self.owner, np.ndarray):
            np.copyto(self.owner, array, casting="no")
        else:
            self.owner.update_inplace(np.ascontiguousarray(array))

    def read(self) -> np.ndarray:
        """A host copy of the array."""
        if self.owner is None:
            raise ValueError("a row view is not read from the host; read its owner")
        if isinstance(self.owner, np.ndarray):
            return self.owner.copy()
        return np.asarray(self.owner.numpy())

    def bind_input(self, binding: ort.IOBinding, name: str) -> None:
        """Bind this array as input ``name``."""
        binding.bind_input(name, self.device, 0, _element(self.datatype), list(self.shape),
                           self.address)  # fmt: skip

    def bind_output(self, binding: ort.IOBinding, name: str) -> None:
        """Bind this array as output ``name``."""
        binding.bind_output(name, self.device, 0, _element(self.datatype), list(self.shape),
                            self.address)  # fmt: skip


@dataclass
class BoundRun:
    """A binding and the options it runs under (a captured graph's id, or none)."""

    session: ort.InferenceSession
    binding: ort.IOBinding
    options: ort.RunOptions
    thread: int

    def replay(self) -> None:
        """Run the binding again (a CUDA graph replays without host work)."""
        if threading.get_ident() != self.thread:
            raise RuntimeError("a captured graph is replayed on the thread that captured it")
        self.session.run_with_iobinding(self.binding, self.options)


def run_options(graph_id: str) -> ort.RunOptions:
    """RunOptions under graph ``graph_id`` (``-1``: no graph), warnings and errors logged."""
    options = ort.RunOptions()
    options.log_severity_level = 2
    options.add_run_config_entry("gpu_graph_id", graph_id)
    return options


class OrtBoundEngine:
    """:class:`mmaas.backends.bound.BoundEngine` over ``session`` (plain runs) and, on CUDA, a
    session with CUDA graphs made by ``graph_session`` when the first capture asks for it."""

    def __init__(
        self,
        session: ort.InferenceSession,
        device: str,
        graph_session: Callable[[], ort.InferenceSession] | None = None,
    ) -> None:
        self.session = session
        self.ort_device = device
        self.device = "gpu" if device == "cuda" else "cpu"
        self.graphs = graph_session is not None
        self._make_graph_session = graph_session
        self._graph_session: ort.InferenceSession | None = None
        self._graph_ids = 0
        self.plain = run_options(NO_GRAPH)

    def allocate(self, shape: Sequence[int], datatype: str) -> OrtArray:
        """A new uninitialised array of ``shape`` on the session's device."""
        shape = tuple(int(d) for d in shape)
        if self.ort_device == "cpu":
            array = np.empty(shape, to_numpy(datatype))
            return OrtArray(shape, datatype, "cpu", array.ctypes.data, array)
        value = ort.OrtValue.ortvalue_from_shape_and_type(
            list(shape), _element(datatype), self.ort_device, 0
        )
        return OrtArray(shape, datatype, self.ort_device, value.data_ptr(), value)

    def free_memory(self) -> int:
        """Bytes free: the CUDA runtime's ``cudaMemGetInfo`` for the current device, or the
        host's ``MemAvailable``."""
        if self.ort_device == "cpu":
            return _host_available()
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        status = _cudart().cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total))
        if status:
            raise RuntimeError(f"cudaMemGetInfo failed with CUDA error {status}")
        return int(free.value)

    def run(
        self, inputs: Mapping[str, np.ndarray | OrtArray], outputs: Mapping[str, OrtArray | None]
    ) -> dict[str, OrtArray]:
        """One plain run (see :meth:`mmaas.backends.bound.BoundEngine.run`)."""
        binding = self._bind(self.session, inputs, outputs)
        self.session.run_with_iobinding(binding, self.plain)
        fresh = [name for name, array in outputs.items() if array is None]
        values = binding.get_outputs()
        names = list(outputs)
        found = {}
        for name in fresh:
            value = values[names.index(name)]
            shape = tuple(value.shape())
            found[name] = OrtArray(shape, _datatype(value), self.ort_device, value.data_ptr(),
                                   value)  # fmt: skip
        return found

    def capture(self, inputs: Mapping[str, OrtArray], outputs: Mapping[str, OrtArray]) -> BoundRun:
        """Capture a run over fixed arrays (see the module docstring)."""
        if not self.graphs:
            binding = self._bind(self.session, inputs, outputs)
            graph = BoundRun(self.session, binding, self.plain, threading.get_ident())
            graph.replay()
            return graph
        if self._graph_session is None:
            assert self._make_graph_session is not None
            self._graph_session = self._make_graph_session()
        self._graph_ids += 1
        session = self._graph_session
        binding = self._bind(session, inputs, outputs)
        graph = BoundRun(session, binding, run_options(str(self._graph_ids)),
                         threading.get_ident())  # fmt: skip
        for _ in range(2):  # the first run of an id allocates, the next captures (+ replays)
            graph.replay()
        return graph

    def _bind(
        self,
        session: ort.InferenceSession,
        inputs: Mapping[str, np.ndarray | OrtArray],
        outputs: Mapping[str, OrtArray | None],
    ) -> ort.IOBinding:
        binding = session.io_binding()
        for name, value in inputs.items():
            if isinstance(value, OrtArray):
                value.bind_input(binding, name)
            else:
                binding.bind_cpu_input(name, np.ascontiguousarray(value))
        for name, target in outputs.items():
            if target is None:
                binding.bind_output(name, self.ort_device)
            else:
                target.bind_output(binding, name)
        return binding


def _cudart() -> ctypes.CDLL:
    """The CUDA runtime library onnxruntime-gpu loaded (the CUDA 13 wheels' libcudart)."""
    for name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise RuntimeError("no CUDA runtime library (libcudart.so.13) on the loader's path")


def _host_available() -> int:
    """``MemAvailable`` of /proc/meminfo in bytes (0 when unreadable)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _datatype(value: ort.OrtValue) -> str:
    """The KServe v2 datatype of an OrtValue (``tensor(float)`` -> FP32...)."""
    names = {"tensor(float)": "FP32", "tensor(float16)": "FP16", "tensor(bfloat16)": "BF16",
             "tensor(int64)": "INT64", "tensor(int32)": "INT32"}  # fmt: skip
    return names[value.data_type()]
