"""TensorRT (NVIDIA GPUs): the builder part of the back end (its compiler), run in the
builder stage.

compile: runs ``trtexec`` (argv from :mod:`mmaas.backends.tensorrt.builder.trtexec.command`, shape
flags for every input the ONNX file leaves dynamic) in the engine directory through
:mod:`mmaas.core.proc`, parses its log (:mod:`mmaas.backends.tensorrt.builder.trtexec.log`) into
the build report, checks the engine's optimization profile read back from that log
against model.yaml's (an input trtexec pinned for want of shapes fails the build), and
keeps the timing cache truthfully (:mod:`mmaas.backends.tensorrt.builder.cache_run`: reused,
rejected, dropped after a failed build and one retry without it). On TensorRT 11
(strongly typed only) an fp16 target is converted in the builder first and checked against
the fp32 graph (:mod:`mmaas.backends.tensorrt.builder.precision`); int8/fp8 builds look for Q/DQ
nodes. The
latency gate uses trtexec's own timer (:meth:`TensorRTCompiler.latency_probe`).
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mmaas.backends import CompileRequest, CompileResult, LatencyProbe
from mmaas.backends.tensorrt.builder.cache_run import CacheRun
from mmaas.backends.tensorrt.builder.settings import TensorRTSettings
from mmaas.backends.tensorrt.builder.timing_cache import CacheKey
from mmaas.backends.tensorrt.builder.trtexec.command import (
    ENGINE_FILE,
    EXPORTS_DIR,
    FP16_ONNX,
    compile_argv,
    converts_to_fp16,
)
from mmaas.backends.tensorrt.builder.trtexec.log import TrtexecLog, parse_trtexec_log
from mmaas.backends.tensorrt.builder.trtexec.network import NetworkInputs, network_inputs
from mmaas.backends.tensorrt.builder.trtexec.profile import profile_mismatches
from mmaas.backends.tensorrt.runtime import TensorRTRuntime, tensorrt_version, trtexec
from mmaas.backends.tensorrt.runtime.bindings import served_signature
from mmaas.backends.tensorrt.runtime.gpu import no_gpu_message
from mmaas.backends.tensorrt.runtime.releases import parse_version
from mmaas.core import proc
from mmaas.core.errors import BuildError, ProcessError
from mmaas.core.manifest import Manifest, ModelInfo

WORKSPACE_TOLERANCE_MIB = 0.5


class TensorRTCompiler:
    """The builder part's compiler of the GPU back end; see the module docstring."""

    name = "tensorrt"
    runtime = TensorRTRuntime()

    def read_settings(self, data: Mapping[str, Any]) -> TensorRTSettings:
        """:class:`TensorRTSettings` from the build request."""
        return TensorRTSettings.from_json(data)

    def data_files(self, directory: Path) -> tuple[str, ...]:
        """``()``: a TensorRT plan is one self-contained file."""
        return ()

    def latency_probe(self, directory: Path, manifest: Manifest) -> LatencyProbe:
        """The latency gate's timer: ``trtexec --loadEngine`` of ``directory``'s engine,
        ``runs`` timed inferences at ``shapes`` (argv:
        :func:`mmaas.backends.tensorrt.builder.latency.latency_argv`), returning ``{"p50_ms",
        "p90_ms", "p99_ms", "mean_ms", "max_ms", "timer"}`` in ms; it raises BuildError
        when trtexec fails, prints no latency summary, or is older than 8.5."""
        from mmaas.backends.tensorrt.builder.latency import (
            latency_argv,
            latency_figures,
            latency_inputs,
        )

        version = manifest.backend.get("version") or tensorrt_version() or ""
        engine = directory / manifest.engine.path

        def probe(shapes: Mapping[str, tuple[int, ...]], runs: int, warmup: int) -> Any:
            inputs = latency_inputs(manifest.model, shapes, directory / EXPORTS_DIR / "inputs")
            argv = latency_argv(
                trtexec(), engine, manifest.model, version, shapes, runs, warmup, inputs
            )
            return latency_figures(_run(argv, directory / EXPORTS_DIR, "trtexec-latency.log"), runs)

        return probe

    def compile(self, request: CompileRequest) -> CompileResult:
        """Build ``out_dir/model.plan`` with trtexec on this host's first GPU, running the
        argv of :func:`~mmaas.backends.tensorrt.builder.trtexec.command.compile_argv` in
        ``out_dir`` (what ``mmaas render`` prints).

        Raises:
            BuildError: no GPU (naming the routes that give a build one), TensorRT is not
                the pinned release, the spec needs a flag this trtexec lacks, trtexec fails
                (its ``[E]`` lines), the engine is missing/empty or got another workspace,
                or its optimization profile is not model.yaml's (an input trtexec pinned
                because it got no shapes is named).
        """
        settings: TensorRTSettings = request.settings
        facts = self.runtime.describe()
        if not facts["gpu"]:
            raise BuildError(no_gpu_message(facts["problem"]))
        version = _require_release(facts["version"], settings)
        onnx, typed, conversion = _prepare_onnx(request, version)
        network = network_inputs(request.out_dir / onnx)
        exports = request.out_dir / EXPORTS_DIR
        exports.mkdir(parents=True, exist_ok=True)
        gpu = facts["gpu"]
        cache = CacheRun(
            settings.timing_cache,
            settings.timing_cache_verify,
            request.cache_dir,
            CacheKey(version, gpu["compute_capability"], gpu["name"]),
            exports,
        )
        argv = compile_argv(
            request.model,
            settings,
            version,
            network,
            onnx=onnx,
            typed_graph=typed,
            trtexec=trtexec(),
            compute_capability=gpu["compute_capability"],
        )
        log = _run(argv, exports, cwd=request.out_dir)
        if not log.passed and cache.offered and not cache.verify:
            cache.retry_without_stored()
            log = _run(argv, exports, cwd=request.out_dir)
        if not log.passed:
            raise BuildError(f"trtexec failed: {log.why()}", hint=f"argv: {shlex.join(argv)}")
        _check_engine(request, log, network, argv)
        served = _served_signature(request)
        timing_cache = cache.finish(log)
        for warning in timing_cache.get("warnings", []):
            print(f"mmaas: warning: {warning}", file=sys.stderr, flush=True)
        report = {
            "trtexec": log.to_report(),
            "timing_cache": timing_cache,
            "onnx_conversion": conversion,
            "portability": _portability(request),
            "warnings": timing_cache.get("warnings", []),
        }
        return CompileResult(engine_file=ENGINE_FILE, command=argv, report=report, model=served)


def _require_release(installed: str | None, settings: TensorRTSettings) -> str:
    pinned = settings.version
    if installed is None:
        raise BuildError(
            "no TensorRT here: neither the tensorrt module nor trtexec answered",
            hint="run the build in the TensorRT builder image",
        )
    if pinned and parse_version(installed)[: len(parse_version(pinned))] != parse_version(pinned):
        raise BuildError(
            f"builder has TensorRT {installed}, model.yaml pins {pinned} "
            "(build.tensorrt.version); engines only run on the release that "
            "built them",
            hint="use the builder_image of that release",
        )
    return installed


def _prepare_onnx(request: CompileRequest, version: str) -> tuple[str, bool, dict | None]:
    """The graph trtexec parses (its argv path: the staged source, or the fp16 conversion
    relative to the engine directory), whether it is typed, the conversion's report."""
    from mmaas.backends.tensorrt.builder.precision import convert_fp16, has_qdq

    precision = request.model.precision
    if precision in ("int8", "fp8"):
        return str(request.source), has_qdq(request.source), None
    if converts_to_fp16(precision, version):
        target = request.out_dir / FP16_ONNX
        target.parent.mkdir(parents=True, exist_ok=True)
        report = convert_fp16(
            request.source,
            target,
            request.model,
            request.settings.tolerance_atol,
            request.settings.tolerance_rtol,
        )
        return FP16_ONNX, True, report
    return str(request.source), False, None


def _run(
    argv: list[str], exports: Path, log_name: str = "trtexec.log", cwd: Path | None = None
) -> TrtexecLog:
    """Run trtexec (in ``cwd``), echoing its output (stderr merged, so [E] lines stay in
    order) to the build log and ``exports/log_name``; a failed run is parsed from the
    output's tail that ProcessError keeps."""
    try:
        text, code = proc.stream(argv, cwd=cwd, what="trtexec"), 0
    except ProcessError as exc:
        text, code = exc.output_tail, exc.returncode
    exports.mkdir(parents=True, exist_ok=True)
    (exports / log_name).write_text(text)
    return parse_trtexec_log(text, code)


def _check_engine(
    request: CompileRequest, log: TrtexecLog, network: NetworkInputs, argv: list[str]
) -> None:
    engine = request.out_dir / ENGINE_FILE
    if not engine.is_file() or engine.stat().st_size == 0:
        raise BuildError(f"trtexec passed but wrote no engine at {engine}")
    problems = profile_mismatches(log.profile, log.shape_overrides, request.model, network)
    if problems:
        raise BuildError(
            "the engine's optimization profile is not model.yaml's:\n"
            + "\n".join(f"    {line}" for line in problems),
            hint=f"argv: {shlex.join(argv)}",
        )
    asked = float(request.settings.workspace_mib)
    if log.workspace_mib is not None and abs(log.workspace_mib - asked) > WORKSPACE_TOLERANCE_MIB:
        raise BuildError(
            f"trtexec used a {log.workspace_mib} MiB workspace, model.yaml asks {asked:g} MiB: "
            "the --memPoolSize spelling in mmaas.backends.tensorrt.runtime.releases is wrong "
            f"for TensorRT {log.tensorrt_version}"
        )


def _served_signature(request: CompileRequest) -> ModelInfo | None:
    """The request's signature with the datatypes of the engine's real bindings (an ONNX
    INT64 input that TensorRT bound as INT32 is served, and described, as INT32); None
    without TensorRT's Python API (trtexec alone), whose absence the stage's engine load
    reports next."""
    try:
        from mmaas.backends.tensorrt.runtime.engine import plan_bindings
    except ImportError:
        return None

    return served_signature(request.model, plan_bindings(request.out_dir / ENGINE_FILE))


def _portability(request: CompileRequest) -> dict[str, Any]:
    return {
        "hardware_compatibility_level": request.settings.hardware_compatibility_level,
        "version_compatible": request.settings.version_compatible,
    }
