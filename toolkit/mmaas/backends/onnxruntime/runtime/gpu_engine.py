"""One GPU instance's request path: a batch of requests (one or many, stacked along axis 0)
on its pinned sessions or its general session, on the instance's own worker thread.

Everything runs on that thread: CUDA graphs live in the thread that captured them
(:mod:`~mmaas.backends.onnxruntime.runtime.graphs`). The dynamic batcher submits a batch
to :attr:`GpuEngine.executor` directly; :meth:`GpuEngine.infer_batch` called from any
other thread hands it over and waits.

Stacking happens where the memory is. At a pinned shape each request's rows are copied
straight into the session's device input buffers at their row offset (host-to-device
from a host array, device-to-device from a CUDA shared memory region), the padding rows
left as they are (a batch model's rows do not mix); the session runs (or replays its
graph); each request's output rows are copied out: to a new host array, or, for a request
whose inputs came in device memory, kept in device memory (a row view of the run's
outputs; a graph's fixed buffers are first copied into a new device allocation, since the
next replay overwrites them). Other shapes run on the general session: host arrays
through ``session.run`` (measured on the H200 as fast as I/O binding with host buffers),
device arrays bound in place through I/O binding with outputs left on the device. Copies
are :class:`~mmaas.core.cuda.Copier` calls on the instance's own stream.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import onnxruntime as ort

from mmaas.backends import Batch, Device
from mmaas.backends.onnxruntime.runtime import graphs
from mmaas.backends.onnxruntime.runtime.binding import OrtBoundEngine
from mmaas.backends.onnxruntime.runtime.placement import Placement
from mmaas.core.cuda import Copier, DeviceArray, StreamCopier, on_host
from mmaas.core.datatypes import NUMPY_BY_DATATYPE
from mmaas.core.manifest import ModelInfo
from mmaas.core.ort_io import has_bfloat16, refused_values, run_session

Part = Mapping[str, Any]  # one request's inputs: numpy arrays or DeviceArrays


class GpuEngine:
    """One GPU instance: its general session, pinned sessions and worker thread.

    Attributes:
        device_inputs: takes :class:`DeviceArray` inputs in place (False when it serves
            on the CPU provider: then they are copied to the host first).
        runs_on: where it runs (Triton's instance group kind and GPU indices).
    """

    def __init__(
        self,
        session: ort.InferenceSession,
        model: ModelInfo,
        worker: ThreadPoolExecutor,
        *,
        device: str = "cuda",
        copier: Copier | None = None,
    ) -> None:
        self.session = session
        self.model = model
        self.worker = worker
        self.device = device
        self.copier = copier or StreamCopier()
        self.pinned: list[graphs.PinnedSession] = []
        self.plain = graphs.run_options(graphs.NO_GRAPH)
        self.facts: dict[str, Any] = {}
        self.placement = Placement()
        self.device_inputs = device == "cuda"
        self.runs_on = Device("GPU", (0,)) if device == "cuda" else Device("CPU")
        self.dtypes = {t.name: np.dtype(NUMPY_BY_DATATYPE[t.datatype]) for t in model.outputs}
        self._thread = worker.submit(threading.get_ident).result()
        self.bfloat16 = has_bfloat16(session)
        self.graph_session: Callable[[], ort.InferenceSession] | None = None

    def bind(self) -> OrtBoundEngine:
        """In-place runs (:mod:`.binding`); captures in a CUDA-graph session of their own
        made by :attr:`graph_session`. Its owner runs the engine in place from then on, so
        the pinned sessions (a copy of the weights each) are released; :meth:`infer` still
        runs, on the general session."""
        self.pinned = []
        if self.device != "cuda":
            return OrtBoundEngine(self.session, "cpu")
        return OrtBoundEngine(self.session, "cuda", self.graph_session)

    @property
    def executor(self) -> ThreadPoolExecutor:
        """The thread every call runs on."""
        return self.worker

    def infer(self, inputs: Part, outputs: Sequence[str]) -> dict[str, Any]:
        """One request; returns ``{name: array}`` of ``outputs`` (in device memory for
        device inputs, see the module doc)."""
        return self.infer_batch([inputs], outputs).outputs[0]

    def infer_batch(self, parts: Sequence[Part], outputs: Sequence[str]) -> Batch:
        """Run ``parts`` (requests whose inputs match in every non-batch dim) as one batch;
        each part's ``outputs`` and the copy-in, run and copy-out times (ns).

        Raises:
            InputError: ONNX Runtime refused the inputs' values (INVALID_ARGUMENT).
        """
        with refused_values():
            if threading.get_ident() == self._thread:
                return self._run(parts, list(outputs))
            return self.worker.submit(self._run, parts, list(outputs)).result()

    def _run(self, parts: Sequence[Part], names: list[str]) -> Batch:
        if not self.device_inputs:
            parts = [on_host(part) for part in parts]
        batch_axis = self.model.max_batch_size > 0
        rows = [_rows(part) for part in parts] if batch_axis else [0]
        first = parts[0]
        shapes = {
            name: (sum(rows), *value.shape[1:]) if batch_axis else tuple(value.shape)
            for name, value in first.items()
        }
        pinned = graphs.match(self.pinned, shapes, batch_axis)
        if pinned is not None:
            return self._on_pinned(pinned, parts, rows, names)
        if any(isinstance(v, DeviceArray) for part in parts for v in part.values()):
            return self._bound(parts, rows, shapes, names)
        return self._plain(parts, rows, names)

    def _on_pinned(
        self, pinned: graphs.PinnedSession, parts: Sequence[Part], rows: list[int], names: list[str]
    ) -> Batch:
        t0 = time.perf_counter_ns()
        for name, buffer in pinned.inputs.items():
            self._stack(buffer.data_ptr(), [part[name] for part in parts])
        t1 = time.perf_counter_ns()
        values = pinned.run()
        t2 = time.perf_counter_ns()
        outputs = self._split(values, pinned.dtypes, parts, rows, names, fresh=not pinned.graph)
        return Batch(outputs, t1 - t0, t2 - t1, time.perf_counter_ns() - t2)

    def _bound(
        self,
        parts: Sequence[Part],
        rows: list[int],
        shapes: Mapping[str, tuple[int, ...]],
        names: list[str],
    ) -> Batch:
        """Some inputs in device memory, at no pinned shape: bound in place (one part) or
        stacked into a new device buffer (several); outputs left on the device."""
        t0 = time.perf_counter_ns()
        binding = self.session.io_binding()
        keep = []  # stacked buffers, alive until the run is over
        for name, value in parts[0].items():
            if len(parts) > 1:
                dtype = value.dtype
                stacked = ort.OrtValue.ortvalue_from_shape_and_type(
                    shapes[name], dtype, self.device, 0
                )
                self._stack(stacked.data_ptr(), [part[name] for part in parts])
                binding.bind_ortvalue_input(name, stacked)
                keep.append(stacked)
            elif isinstance(value, DeviceArray):
                binding.bind_input(
                    name, self.device, 0, value.dtype, list(value.shape), value.pointer
                )
            else:
                binding.bind_cpu_input(name, np.ascontiguousarray(value))
        for name in names:
            binding.bind_output(name, self.device)
        t1 = time.perf_counter_ns()
        self.session.run_with_iobinding(binding, self.plain)
        t2 = time.perf_counter_ns()
        values = dict(zip(names, binding.get_outputs(), strict=True))
        outputs = self._split(values, self.dtypes, parts, rows, names, fresh=True)
        return Batch(outputs, t1 - t0, t2 - t1, time.perf_counter_ns() - t2)

    def _plain(self, parts: Sequence[Part], rows: list[int], names: list[str]) -> Batch:
        """Host arrays at no pinned shape: ``session.run`` on the stacked arrays."""
        t0 = time.perf_counter_ns()
        feeds = (
            dict(parts[0])
            if len(parts) == 1
            else {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}
        )
        t1 = time.perf_counter_ns()
        values = (
            run_session(self.session, names, feeds, bfloat16=True)
            if self.bfloat16
            else self.session.run(names, feeds, self.plain)
        )
        t2 = time.perf_counter_ns()
        if len(parts) == 1:
            outputs = [dict(zip(names, values, strict=True))]
        else:
            bounds = np.cumsum(rows)[:-1]
            pieces = [np.split(value, bounds) for value in values]
            outputs = [{n: pieces[j][i] for j, n in enumerate(names)} for i in range(len(parts))]
        return Batch(outputs, t1 - t0, t2 - t1, time.perf_counter_ns() - t2)

    def _stack(self, base: int, values: Sequence[Any]) -> None:
        """Copy ``values`` (host or device arrays) one after another from ``base``."""
        offset = 0
        for value in values:
            if isinstance(value, DeviceArray):
                self.copier.copy(base + offset, value.pointer, value.nbytes)
                offset += value.nbytes
            else:
                host = np.ascontiguousarray(value)
                self.copier.copy(base + offset, host.ctypes.data, host.nbytes)
                offset += host.nbytes

    def _split(
        self,
        values: Mapping[str, ort.OrtValue],
        dtypes: Mapping[str, np.dtype],
        parts: Sequence[Part],
        rows: list[int],
        names: list[str],
        fresh: bool,
    ) -> list[dict[str, Any]]:
        """Each part's output rows (module doc); ``fresh``: the values belong to this run
        alone (else a graph's buffers, which the next replay overwrites)."""
        outputs: list[dict[str, Any]] = [{} for _ in parts]
        for name in names:
            value = values[name]
            whole = DeviceArray(value.data_ptr(), tuple(value.shape()), dtypes[name], 0, value)
            if rows[0] and (not whole.shape or whole.shape[0] < sum(rows)):
                raise ValueError(
                    f"output {name!r} has shape {list(whole.shape)} for a batch of {sum(rows)} "
                    "rows; it has no batch axis, so set MMAAS_DYNAMIC_BATCHING=false and "
                    "declare no batched shapes for this model"
                )
            start = 0
            for index, part in enumerate(parts):
                piece = whole.rows(start, start + rows[index]) if rows[index] else whole
                start += rows[index]
                outputs[index][name] = self._deliver(piece, part, fresh)
        return outputs

    def _deliver(self, piece: DeviceArray, part: Part, fresh: bool) -> Any:
        """``piece`` where its request wants it: kept on the device for a request whose
        inputs came in device memory, else copied to a new host array."""
        if not any(isinstance(v, DeviceArray) for v in part.values()):
            return piece.to_host(self.copier)
        if fresh:
            return piece
        copy = ort.OrtValue.ortvalue_from_shape_and_type(
            list(piece.shape), piece.dtype, self.device, 0
        )
        self.copier.copy(copy.data_ptr(), piece.pointer, piece.nbytes)
        return DeviceArray(copy.data_ptr(), piece.shape, piece.dtype, 0, copy)


def _rows(part: Part) -> int:
    return int(next(iter(part.values())).shape[0]) if part else 1
