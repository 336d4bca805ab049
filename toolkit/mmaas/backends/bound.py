"""An engine's optional capability of in-place runs (``Engine.bind()``): arrays allocated
once where the engine computes, bound by address, and runs captured once and replayed
(CUDA graphs). The generation loop keeps its KV cache this way; a back end offers it by
an engine method ``bind()`` returning a :class:`BoundEngine`. Imports only numpy."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np


class DeviceArray(Protocol):
    """An array held where an engine computes (GPU memory, or host memory for a CPU engine),
    allocated once by :meth:`BoundEngine.allocate`; what a bound run reads or writes in
    place. ``shape`` and ``datatype`` (KServe v2 name) are fixed."""

    shape: tuple[int, ...]
    datatype: str

    def rows(self, start: int, stop: int) -> DeviceArray:
        """The rows ``start:stop`` of axis 0 as an array of their own (same memory, no
        copy), to bind in place; it cannot be written or read from the host."""
        ...

    def write(self, array: np.ndarray) -> None:
        """Copy a host array of this shape and datatype in (host -> device)."""
        ...

    def read(self) -> np.ndarray:
        """A host copy of the whole array (device -> host)."""
        ...


class Graph(Protocol):
    """A run captured once (a CUDA graph; on a CPU engine the bound run itself), replayed on
    the arrays it was captured with: refill the inputs with :meth:`DeviceArray.write`."""

    def replay(self) -> None:
        """Run the captured work again (on the thread that captured it)."""
        ...


class BoundEngine(Protocol):
    """An engine's optional capability (``Engine.bind()``): runs whose inputs and outputs stay
    where the engine computes, bound by address (I/O binding), so state such as a KV cache
    is allocated once and updated in place, never copied through the host per run.

    Attributes:
        device: ``"cpu"`` or ``"gpu"``.
        graphs: whether :meth:`capture` records device work (CUDA graphs); False: it binds.
    """

    device: str
    graphs: bool

    def allocate(self, shape: Sequence[int], datatype: str) -> DeviceArray:
        """A new array on the engine's device (uninitialised)."""
        ...

    def free_memory(self) -> int:
        """Bytes free on the engine's device now (host memory available for a CPU one)."""
        ...

    def run(
        self,
        inputs: Mapping[str, np.ndarray | DeviceArray],
        outputs: Mapping[str, DeviceArray | None],
    ) -> dict[str, DeviceArray]:
        """Run once. Host arrays are copied in for this run; device arrays are bound in
        place. An output given an array is written there; one given None is allocated for
        this run and returned (read it with :meth:`DeviceArray.read`).

        Raises:
            Exception: the back end's own error (bad shapes, a kernel failure).
        """
        ...

    def capture(
        self, inputs: Mapping[str, DeviceArray], outputs: Mapping[str, DeviceArray]
    ) -> Graph:
        """Capture the run over these arrays (it runs once as it is captured); the graph
        belongs to the calling thread.

        Raises:
            Exception: the back end refuses the capture (its own error).
        """
        ...


def bound_engine(engine: Any) -> BoundEngine | None:
    """``engine.bind()`` when the back end's engine offers in-place runs, else None."""
    bind = getattr(engine, "bind", None)
    return None if bind is None else bind()
