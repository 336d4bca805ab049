"""ONNX Runtime on a GPU: loading one instance, its preflight (C34) and its pinned sessions.

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
counts. With the CUDA provider every declared shape gets a session of its own
(:mod:`~mmaas.backends.onnxruntime.runtime.graphs`: with ``cuda_graphs`` it captures its
CUDA graph); when ONNX Runtime refuses capture (a node left on the CPU that needs a
Memcpy), the nodes on the CPU are named and the instance's pinned sessions run without
graphs. The request path is :mod:`~mmaas.backends.onnxruntime.runtime.gpu_engine`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnxruntime as ort

from mmaas.backends.onnxruntime.runtime import graphs as cuda_graphs
from mmaas.backends.onnxruntime.runtime.gpu_engine import GpuEngine
from mmaas.backends.onnxruntime.runtime.placement import Placement, capture_fd2, parse_placement
from mmaas.backends.onnxruntime.runtime.providers import CPU, CUDA, TENSORRT, providers
from mmaas.backends.onnxruntime.runtime.settings import GpuSettings
from mmaas.core.errors import CompatibilityError
from mmaas.core.manifest import ModelInfo
from mmaas.core.ort_io import ORT_FATAL, ort_value, session_options
from mmaas.core.samples import sample_inputs

log = logging.getLogger("mmaas.server")
CAPTURE_REFUSED = "cannot use the graph capture feature"


def load_gpu(
    path: Path,
    model: ModelInfo,
    gpu: GpuSettings,
    *,
    graphs: bool,
    cache_dir: Path,
    pinned: bool = True,
) -> GpuEngine:
    """Create and check one GPU instance; ``pinned``: also its pinned sessions (a
    server's instance; the builder stage's checks run on the general session alone), with
    CUDA graphs when ``graphs`` and ``gpu.cuda_graphs``.

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
        engine = _checked(path, model, gpu, cache_dir, worker)
    except _NotActive as exc:
        worker.shutdown()
        return _fallback(path, model, gpu, str(exc))
    if pinned and gpu.accelerator == "cuda":
        _pin_all(engine, gpu, path, cache_dir, graphs and gpu.cuda_graphs)
    if not engine.pinned:  # cuDNN's algorithm search at the opt shape before readiness
        names = [t.name for t in model.outputs]
        opt = sample_inputs(model, "opt")
        worker.submit(engine.session.run, names, opt, engine.plain).result()
    return engine


class _NotActive(Exception):
    """The GPU provider did not start; the message is the reason."""


def _checked(
    path: Path,
    model: ModelInfo,
    gpu: GpuSettings,
    cache_dir: Path,
    worker: ThreadPoolExecutor,
) -> GpuEngine:
    """The placement (a verbose session, then dropped: a verbose session also logs every
    run), the C34 checks, then the general serving session (quiet, no graphs)."""
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
    engine.facts = {"providers": session.get_providers(), "placement": placement.nodes}
    engine.graph_session = lambda: _session(path, model, gpu, True, cache_dir, False)[0]
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
        binding.bind_ortvalue_input(name, ort_value(ort, array))  # BF16 too
    for output in session.get_outputs():
        binding.bind_output(output.name, "cuda")
    session.run_with_iobinding(binding, cuda_graphs.run_options(cuda_graphs.NO_GRAPH))
    devices = {value.device_name().lower() for value in binding.get_outputs()}
    return None if devices == {"cuda"} else f"a bound output landed on {devices}, not the GPU"


def _pin_all(
    engine: GpuEngine, gpu: GpuSettings, path: Path, cache_dir: Path, graphs: bool
) -> None:
    """A pinned session per declared shape, made on the engine's worker thread, each
    capturing its CUDA graph when ``graphs``; when ONNX Runtime refuses capture (nodes it
    cannot put on the GPU without a Memcpy), the nodes on the CPU are named and the
    sessions are pinned without graphs."""
    started = time.perf_counter()
    for shapes in cuda_graphs.order(gpu.graph_shapes):
        feeds = _feeds(engine.model, shapes)
        try:
            try:
                pinned = _pin(engine, gpu, path, cache_dir, feeds, graphs)
            except Exception as exc:  # ORT's own error types
                if not graphs or CAPTURE_REFUSED not in str(exc):
                    raise
                _refused(engine, str(exc).strip())
                graphs = False
                pinned = _pin(engine, gpu, path, cache_dir, feeds, graphs)
        except Exception as exc:  # ORT's own error types
            log.warning("no session pinned at %s, it runs on the general session: %s",
                        _text(shapes), exc)  # fmt: skip
            continue
        engine.pinned.append(pinned)
    engine.facts["pinned"] = [_text(p.shapes) for p in engine.pinned]
    engine.facts["cuda_graphs"] = [_text(p.shapes) for p in engine.pinned if p.graph]
    log.info(
        "sessions pinned at %s (%s) in %.0f ms",
        "; ".join(engine.facts["pinned"]) or "no shape",
        "CUDA graphs" if engine.facts["cuda_graphs"] else "no CUDA graphs",
        (time.perf_counter() - started) * 1000,
    )


def _pin(
    engine: GpuEngine,
    gpu: GpuSettings,
    path: Path,
    cache_dir: Path,
    feeds: dict[str, np.ndarray],
    graph: bool,
) -> cuda_graphs.PinnedSession:
    def make() -> cuda_graphs.PinnedSession:
        session, _ = _session(path, engine.model, gpu, graph, cache_dir, False)
        return cuda_graphs.pin(session, feeds, engine.device, graph)

    return engine.worker.submit(make).result()


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
    worker = ThreadPoolExecutor(1, thread_name_prefix="mmaas-cpu")
    engine = GpuEngine(session, model, worker, device="cpu")
    engine.facts = {"providers": [CPU], "fallback": reason}
    return engine


def _feeds(model: ModelInfo, shapes: Mapping[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    """Sample inputs at ``shapes``: the opt-point sample, cut or tiled along each axis."""
    opt = sample_inputs(model, "opt")
    return {name: np.resize(opt[name], shapes[name]) for name in opt}


def _text(shapes: Mapping[str, Sequence[int]]) -> str:
    return ", ".join(f"{n}: {'x'.join(map(str, s))}" for n, s in shapes.items())
