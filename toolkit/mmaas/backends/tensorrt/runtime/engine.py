"""A deserialized TensorRT engine run on one CUDA stream (TensorRT Python API 8.5+/10.x/11.x
``set_input_shape`` / ``set_tensor_address`` / ``execute_async_v3``, and cuda-python's
runtime bindings for memory and streams). Imported only by
:meth:`mmaas.backends.tensorrt.runtime.TensorRTRuntime.load`, so nothing else needs TensorRT.

One optimization profile (index 0), as ``trtexec --minShapes/--optShapes/--maxShapes``
builds it. Device buffers grow to the largest request seen and are reused. A request's
array is cast into its binding's datatype by the checked rule of
:func:`mmaas.backends.tensorrt.runtime.bindings.to_binding` (an INT64 value that an INT32 binding
cannot hold is refused naming the input, never wrapped).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mmaas.backends.tensorrt.runtime.bindings import read_bindings, to_binding
from mmaas.core.datatypes import to_numpy
from mmaas.core.manifest import ModelInfo

try:  # cuda-python >= 12.6 names the module cuda.bindings; older releases cuda.cudart
    from cuda.bindings import runtime as cudart
except ImportError:  # pragma: no cover - depends on the installed cuda-python
    from cuda import cudart  # type: ignore[no-redef]
import tensorrt as trt


class ProfileError(ValueError):
    """A request shape lies outside the engine's optimization profile."""


def _check(result: tuple[Any, ...]) -> Any:
    """Unwrap a cuda-python ``(cudaError_t, value...)`` result; raise on an error."""
    error, *values = result
    if error != cudart.cudaError_t.cudaSuccess:
        raise RuntimeError(f"CUDA error {error}: {cudart.cudaGetErrorString(error)[1]}")
    return values[0] if len(values) == 1 else values


class TensorRTEngine:
    """A loaded engine; call :meth:`infer` from one thread at a time."""

    def __init__(self, plan: Path, model: ModelInfo) -> None:
        self.model = model
        self.logger = trt.Logger(trt.Logger.WARNING)
        self.runtime = trt.Runtime(self.logger)
        self.engine = self.runtime.deserialize_cuda_engine(plan.read_bytes())
        if self.engine is None:
            raise RuntimeError(f"{plan}: TensorRT could not deserialize the engine")
        self.context = self.engine.create_execution_context()
        self.stream = _check(cudart.cudaStreamCreate())
        self.context.set_optimization_profile_async(0, self.stream)
        self.buffers: dict[str, tuple[int, int]] = {}  # name -> (device pointer, bytes)
        self.datatypes = read_bindings(self.engine)  # name -> KServe v2 datatype

    def infer(
        self, inputs: Mapping[str, np.ndarray], outputs: Sequence[str]
    ) -> dict[str, np.ndarray]:
        """Set the input shapes, copy in, run ``execute_async_v3`` on the stream, copy out.

        Raises:
            InputError: a value does not fit its binding's datatype.
            ProfileError: an input shape outside min..max of profile 0.
            RuntimeError: TensorRT or CUDA failed.
        """
        for name, array in inputs.items():
            self._check_profile(name, array.shape)
            host = to_binding(name, array, self.datatypes[name])
            if not self.context.set_input_shape(name, host.shape):
                raise ProfileError(f"input {name!r}: TensorRT refused shape {list(host.shape)}")
            self._bind(name, host.nbytes)
            _check(
                cudart.cudaMemcpyAsync(
                    self.buffers[name][0],
                    host.ctypes.data,
                    host.nbytes,
                    cudart.cudaMemcpyKind.cudaMemcpyHostToDevice,
                    self.stream,
                )
            )
        results = {}
        for name in self._output_names():
            shape = tuple(self.context.get_tensor_shape(name))
            results[name] = np.empty(shape, to_numpy(self.datatypes[name]))
            self._bind(name, max(results[name].nbytes, 1))
        if not self.context.execute_async_v3(self.stream):
            raise RuntimeError("TensorRT execute_async_v3 failed (see the TensorRT log)")
        for name in outputs:
            out = results[name]
            _check(
                cudart.cudaMemcpyAsync(
                    out.ctypes.data,
                    self.buffers[name][0],
                    out.nbytes,
                    cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost,
                    self.stream,
                )
            )
        _check(cudart.cudaStreamSynchronize(self.stream))
        return {name: results[name] for name in outputs}

    def close(self) -> None:
        """Free the device buffers and the stream."""
        for pointer, _ in self.buffers.values():
            cudart.cudaFree(pointer)
        self.buffers.clear()
        cudart.cudaStreamDestroy(self.stream)

    def _check_profile(self, name: str, shape: tuple[int, ...]) -> None:
        low, _, high = self.engine.get_tensor_profile_shape(name, 0)
        inside = len(shape) == len(low) and all(
            lo <= s <= hi for s, lo, hi in zip(shape, low, high, strict=True)
        )
        if not inside:
            raise ProfileError(
                f"input {name!r}: shape {list(shape)} is outside the "
                f"optimization profile (min {list(low)}, max {list(high)})"
            )

    def _output_names(self) -> list[str]:
        names = (self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors))
        return [n for n in names if self.engine.get_tensor_mode(n) == trt.TensorIOMode.OUTPUT]

    def _bind(self, name: str, nbytes: int) -> None:
        pointer, size = self.buffers.get(name, (0, 0))
        if nbytes > size:
            if pointer:
                _check(cudart.cudaFree(pointer))
            pointer, size = _check(cudart.cudaMalloc(nbytes)), nbytes
            self.buffers[name] = (pointer, size)
        self.context.set_tensor_address(name, pointer)


def plan_bindings(plan: Path) -> dict[str, str]:
    """:func:`read_bindings` of the engine file ``plan`` (the builder stage's check of what
    trtexec built).

    Raises:
        RuntimeError: TensorRT cannot deserialize it. BuildError: as read_bindings.
    """
    runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
    engine = runtime.deserialize_cuda_engine(plan.read_bytes())
    if engine is None:
        raise RuntimeError(f"{plan}: TensorRT could not deserialize the engine")
    return read_bindings(engine)
