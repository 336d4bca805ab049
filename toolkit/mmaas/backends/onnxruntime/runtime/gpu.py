"""ONNX Runtime on a GPU: the CUDA (or TensorRT) session of one instance, its preflight
(C34) and its request path.

Load: the session is created with ``enable_fallback=0`` and the providers of
:mod:`~mmaas.backends.onnxruntime.runtime.providers`, its verbose log captured
(:mod:`~mmaas.backends.onnxruntime.runtime.placement`); the preflight then requires the GPU
provider to be the session's first provider and a bound output to land in device memory
(``IOBinding.bind_output(name, "cuda")`` -> ``device_name() == "cuda"``) on a verbose
probe session (its log holds the placement; it is then dropped, since a verbose session
logs every run too), else it raises
:class:`~mmaas.core.errors.CompatibilityError` with the reason ONNX Runtime logged (no
CUDA device, a library that did not load, the CPU onnxruntime installed instead of
onnxruntime-gpu), so the server exits before it is ready; ``allow_cpu_fallback`` serves on
the CPU provider instead, saying why. The node placement is logged with per-provider
counts. With ``cuda_graphs`` every declared shape is captured
(:mod:`~mmaas.backends.onnxruntime.runtime.graphs`); when ONNX Runtime refuses capture (a node left
on the CPU that needs a Memcpy), the nodes on the CPU are named and the instance serves
without graphs.

Request path: everything runs on the instance's own worker thread (the graphs live in
that thread's CUDA context). A request at a captured shape replays its graph (one copy in
per input, one copy out per output; each graph has a session of its own, see
:mod:`~mmaas.backends.onnxruntime.runtime.graphs`); any other shape runs ``session.run`` on the
instance's graph-free session, which copies each input to the device once and each output
back once
(measured on the H200 as fast as I/O binding with host buffers: the binding pays only with
device-resident buffers, which the graphs have).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from mmaas.backends.onnxruntime.runtime import graphs as cuda_graphs
from mmaas.backends.onnxruntime.runtime.placement import Placement, capture_fd2, parse_placement
from mmaas.backends.onnxruntime.runtime.providers import CPU, CUDA, TENSORRT, providers
from mmaas.backends.onnxruntime.runtime.settings import GpuSettings
from mmaas.core.errors import CompatibilityError
from mmaas.core.manifest import ModelInfo
from mmaas.core.ort_io import ORT_FATAL, refused_values, session_options
from mmaas.core.samples import sample_inputs

log = logging.getLogger("mmaas.server")
CAPTURE_REFUSED = "cannot use the graph capture feature"


class GpuEngine:
    """One GPU instance: a session, its captured graphs and its worker thread."""

    def __init__(
        self, session: ort.InferenceSession, model: ModelInfo, worker: ThreadPoolExecutor
    ) -> None:
        self.session = session
        self.model = model
        self.worker = worker
        self.graphs: list[cuda_graphs.CapturedGraph] = []
        self.plain = cuda_graphs.run_options(cuda_graphs.NO_GRAPH)
        self.facts: dict[str, Any] = {}
        self.placement = Placement()
        self.graphs_wanted = False

    def infer(
        self, inputs: Mapping[str, np.ndarray], outputs: Sequence[str]
    ) -> dict[str, np.ndarray]:
        """Run once on the worker thread; returns ``{name: array}`` of ``outputs``.

        Raises:
            InputError: ONNX Runtime refused the inputs' values (INVALID_ARGUMENT).
        """
        with refused_values():
            return self.worker.submit(self._infer, inputs, list(outputs)).result()

    def _infer(self, inputs: Mapping[str, np.ndarray], names: list[str]) -> dict[str, np.ndarray]:
        found = cuda_graphs.match(self.graphs, inputs, self.model.max_batch_size > 0)
        if found is not None:
            graph, rows = found
            return graph.replay(inputs, rows, names)
        values = self.session.run(names, dict(inputs), self.plain)
        return dict(zip(names, values, strict=True))


def load_gpu(
    path: Path,
    model: ModelInfo,
    gpu: GpuSettings,
    *,
    graphs: bool,
    cache_dir: Path,
    warm: bool = True,
) -> GpuEngine:
    """Create, check and (``graphs`` and ``gpu.cuda_graphs``) capture one GPU instance;
    ``warm``: run every batch size once before returning (:func:`_warm_batches`).

    Raises:
        CompatibilityError: the GPU provider is not active (module doc), unless
            ``gpu.allow_cpu_fallback``.
    """
    if CUDA not in ort.get_available_providers():
        reason = (
            "this onnxruntime has no CUDA provider (the CPU onnxruntime is installed "
            f"instead of onnxruntime-gpu; providers: {ort.get_available_providers()})"
        )
        return _fallback(path, model, gpu, reason)
    worker = ThreadPoolExecutor(1, thread_name_prefix="mmaas-gpu")
    try:
        engine = _checked(path, model, gpu, graphs and gpu.cuda_graphs, cache_dir, worker)
    except _NotActive as exc:
        worker.shutdown()
        return _fallback(path, model, gpu, str(exc))
    if engine.graphs_wanted:
        _capture_all(engine, gpu, path, cache_dir)
    if warm:
        _warm_batches(engine)
    return engine


def _warm_batches(engine: GpuEngine) -> None:
    """Run every batch size 1..max_batch_size once at the opt dims: cuDNN picks its
    algorithms for a shape on its first run (EXHAUSTIVE: up to a second each on the H200),
    and dynamic batching makes any batch size, so that cost moves before readiness."""
    batch = engine.model.max_batch_size
    if batch <= 1:
        return
    started = time.perf_counter()
    names = [t.name for t in engine.model.outputs]
    opt = sample_inputs(engine.model, "opt")
    for rows in range(1, batch + 1):
        engine.infer({n: np.resize(a, (rows, *a.shape[1:])) for n, a in opt.items()}, names)
    log.info(
        "batch sizes 1-%d warmed up at the opt shape (%.0f ms)",
        batch,
        (time.perf_counter() - started) * 1000,
    )


class _NotActive(Exception):
    """The GPU provider did not start; the message is the reason."""


def _checked(
    path: Path,
    model: ModelInfo,
    gpu: GpuSettings,
    graphs: bool,
    cache_dir: Path,
    worker: ThreadPoolExecutor,
) -> GpuEngine:
    """The placement (a verbose session, then dropped: a verbose session also logs every
    run), the C34 checks, then the serving session (quiet), with graphs when asked for and
    ONNX Runtime accepts them."""
    try:
        probe, placement = worker.submit(
            _session, path, model, gpu, False, cache_dir, True
        ).result()
    except Exception as exc:  # ORT's own error types (Fail, InvalidArgument...)
        raise _NotActive(f"ONNX Runtime could not start {CUDA}: {exc}") from exc
    reason = (
        _inactive(probe, gpu, placement) or worker.submit(_output_device, probe, model).result()
    )
    if reason is not None:
        raise _NotActive(reason)
    del probe
    log.info("GPU session placed nodes on %s", placement.summary())
    session, _ = worker.submit(_session, path, model, gpu, False, cache_dir, False).result()
    engine = GpuEngine(session, model, worker)
    engine.placement = placement
    engine.graphs_wanted = graphs
    engine.facts = {"providers": session.get_providers(), "placement": placement.nodes}
    return engine


def _session(
    path: Path, model: ModelInfo, gpu: GpuSettings, graphs: bool, cache_dir: Path, verbose: bool
) -> tuple[ort.InferenceSession, Placement]:
    """A GPU session; ``verbose``: with ONNX Runtime's log captured (the placement lines
    are logged at level 0, a provider library that fails to load at level 3 by the default
    logger, which mmaas otherwise keeps at FATAL)."""
    options = session_options(ort)
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    chain = providers(
        gpu,
        model.precision,
        model.inputs,
        graphs=graphs,
        cache_dir=cache_dir,
        model_dir=path.parent,
    )
    if gpu.accelerator == "tensorrt":
        cache_dir.mkdir(parents=True, exist_ok=True)
    if verbose:
        options.log_severity_level = 0
        ort.set_default_logger_severity(3)
    try:
        with capture_fd2() as captured:
            session = ort.InferenceSession(
                str(path),
                options,
                providers=[name for name, _ in chain],
                provider_options=[opts for _, opts in chain],
                enable_fallback=0,
            )
    finally:
        ort.set_default_logger_severity(ORT_FATAL)  # where mmaas keeps it
    return session, parse_placement(captured.text)


def _inactive(session: ort.InferenceSession, gpu: GpuSettings, placement: Placement) -> str | None:
    expected = TENSORRT if gpu.accelerator == "tensorrt" else CUDA
    active = session.get_providers()
    if active and active[0] == expected:
        return None
    why = "; ".join(placement.errors) or "ONNX Runtime logged no reason"
    return f"{expected} is not active (the session runs on {', '.join(active)}): {why}"


def _output_device(session: ort.InferenceSession, model: ModelInfo) -> str | None:
    """Run once at the opt shapes with outputs bound to the GPU; None when they land there."""
    binding = session.io_binding()
    for name, array in sample_inputs(model, "opt").items():
        binding.bind_cpu_input(name, array)
    for output in session.get_outputs():
        binding.bind_output(output.name, "cuda")
    session.run_with_iobinding(binding, cuda_graphs.run_options(cuda_graphs.NO_GRAPH))
    devices = {value.device_name().lower() for value in binding.get_outputs()}
    return None if devices == {"cuda"} else f"a bound output landed on {devices}, not the GPU"


def _capture_all(engine: GpuEngine, gpu: GpuSettings, path: Path, cache_dir: Path) -> None:
    """A graph session per declared shape, captured on the engine's worker thread; when
    ONNX Runtime refuses capture (nodes it cannot put on the GPU without a Memcpy), the
    nodes on the CPU are named and the instance serves without graphs."""
    for shapes in cuda_graphs.order(gpu.graph_shapes):
        feeds = _feeds(engine.model, shapes)
        try:
            graph = engine.worker.submit(_graph, path, engine.model, gpu, cache_dir, feeds).result()
        except Exception as exc:  # ORT's own error types
            if CAPTURE_REFUSED in str(exc):
                _refused(engine, str(exc).strip())
                break
            log.warning(
                "CUDA graph at %s not captured, that shape runs without a graph: %s",
                _text(shapes),
                exc,
            )
            continue
        engine.graphs.append(graph)
    engine.facts["cuda_graphs"] = [_text(g.shapes) for g in engine.graphs]
    log.info("CUDA graphs captured at %s", "; ".join(engine.facts["cuda_graphs"]) or "no shape")


def _graph(
    path: Path, model: ModelInfo, gpu: GpuSettings, cache_dir: Path, feeds: dict[str, np.ndarray]
) -> cuda_graphs.CapturedGraph:
    session, _ = _session(path, model, gpu, True, cache_dir, False)
    return cuda_graphs.capture(session, feeds)


def _refused(engine: GpuEngine, error: str) -> None:
    placement = engine.placement
    log.warning(
        "CUDA graphs refused by ONNX Runtime (%s); nodes on the CPU provider: %s; %d Memcpy "
        "node(s) added. Serving without CUDA graphs: export the model so that these nodes "
        "run on the GPU (or need no copy) to capture it",
        error.splitlines()[-1],
        ", ".join(placement.cpu_nodes) or "none",
        placement.memcpy,
    )
    engine.facts["cuda_graphs_refused"] = {"cpu_nodes": placement.cpu_nodes, "error": error}


def _fallback(path: Path, model: ModelInfo, gpu: GpuSettings, reason: str) -> GpuEngine:
    if not gpu.allow_cpu_fallback:
        raise CompatibilityError(
            f"GPU instance not ready: {reason}",
            hint="check the GPU (nvidia-smi, CUDA_VISIBLE_DEVICES, --gpus), onnxruntime-gpu "
            "and its CUDA/cuDNN libraries, or set build.onnxruntime.allow_cpu_fallback: true",
        )
    log.warning("serving on %s, not the GPU (allow_cpu_fallback): %s", CPU, reason)
    session = ort.InferenceSession(str(path), providers=[CPU])
    engine = GpuEngine(session, model, ThreadPoolExecutor(1, thread_name_prefix="mmaas-cpu"))
    engine.facts = {"providers": [CPU], "fallback": reason}
    return engine


def _feeds(model: ModelInfo, shapes: Mapping[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    """Sample inputs at ``shapes``: the opt-point sample, cut or tiled along each axis."""
    opt = sample_inputs(model, "opt")
    return {name: np.resize(opt[name], shapes[name]) for name in opt}


def _text(shapes: Mapping[str, Sequence[int]]) -> str:
    return ", ".join(f"{n}: {'x'.join(map(str, s))}" for n, s in shapes.items())
