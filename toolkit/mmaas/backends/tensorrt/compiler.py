"""TensorRT (NVIDIA GPUs): the compiler part of the back end, run in the builder stage.

compile: runs ``trtexec`` (argv from :mod:`mmaas.backends.tensorrt.trtexec.argv`) through
:mod:`mmaas.core.proc`, parses its log (:mod:`mmaas.backends.tensorrt.trtexec.log`) into
the build report, and keeps the timing cache in the host store
(:mod:`mmaas.backends.tensorrt.timing_cache`): a build that fails with a stored cache
drops it and retries once without it, and says so. On TensorRT 11 (strongly typed only)
an fp16 target is converted in the builder first and checked against the fp32 graph
(:mod:`mmaas.backends.tensorrt.precision`); int8/fp8 builds look for Q/DQ nodes. The
latency gate uses trtexec's own timer (:meth:`TensorRTCompiler.latency_probe`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mmaas.backends import CompileRequest, CompileResult, LatencyProbe
from mmaas.backends.tensorrt.gpu import no_gpu_message
from mmaas.backends.tensorrt.releases import parse_version
from mmaas.backends.tensorrt.runtime import TensorRTRuntime, tensorrt_version, trtexec
from mmaas.backends.tensorrt.settings import TensorRTSettings
from mmaas.backends.tensorrt.trtexec.argv import trtexec_argv
from mmaas.backends.tensorrt.trtexec.log import TrtexecLog, parse_trtexec_log
from mmaas.core import proc
from mmaas.core.errors import BuildError, ProcessError
from mmaas.core.manifest import Manifest

ENGINE_FILE = "model.plan"
EXPORTS_DIR = "trtexec"
WORKSPACE_TOLERANCE_MIB = 0.5


class TensorRTCompiler:
    """The compiler part of the GPU back end; see the module docstring."""

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
        :func:`mmaas.backends.tensorrt.latency.latency_argv`), returning ``{"p50_ms",
        "p90_ms", "p99_ms", "mean_ms", "max_ms", "timer"}`` in ms; it raises BuildError
        when trtexec fails, prints no latency summary, or is older than 8.5."""
        from mmaas.backends.tensorrt.latency import latency_argv, latency_figures

        version = manifest.backend.get("version") or tensorrt_version() or ""
        engine = directory / manifest.engine.path

        def probe(shapes: Mapping[str, tuple[int, ...]], runs: int, warmup: int) -> Any:
            argv = latency_argv(trtexec(), engine, manifest.model, version, shapes, runs, warmup)
            return latency_figures(_run(argv, directory / EXPORTS_DIR, "trtexec-latency.log"), runs)

        return probe

    def compile(self, request: CompileRequest) -> CompileResult:
        """Build ``out_dir/model.plan`` with trtexec on this host's first GPU.

        Raises:
            BuildError: no GPU (naming the routes that give a build one), TensorRT is not
                the pinned release, the spec needs a flag this trtexec lacks, trtexec fails
                (its ``[E]`` lines), or the engine is missing/empty or got another workspace.
        """
        settings: TensorRTSettings = request.settings
        facts = self.runtime.describe()
        if not facts["gpu"]:
            raise BuildError(no_gpu_message(facts["problem"]))
        version = _require_release(facts["version"], settings)
        onnx, typed, conversion = _prepare_onnx(request, version)
        exports = request.out_dir / EXPORTS_DIR
        exports.mkdir(parents=True, exist_ok=True)
        cache = _CacheRun(request, version, facts["gpu"], exports)

        def argv_for(timing_cache: str | None) -> list[str]:
            return trtexec_argv(
                request.model,
                settings,
                version,
                str(onnx),
                str(request.out_dir / ENGINE_FILE),
                timing_cache,
                exports_dir=str(exports),
                calibration_cache=_calibration(request, settings),
                typed_graph=typed,
                compute_capability=facts["gpu"]["compute_capability"],
                verify_cache=settings.timing_cache_verify,
                trtexec=trtexec(),
            )

        argv = argv_for(cache.path)
        log = _run(argv, exports)
        if not log.passed and cache.reused and not cache.verify:
            argv = argv_for(cache.retry_without_stored())
            log = _run(argv, exports)
        if not log.passed:
            raise BuildError(f"trtexec failed: {log.why()}", hint=f"argv: {' '.join(argv)}")
        _check_engine(request, log)
        report = {
            "trtexec": log.to_report(),
            "timing_cache": cache.finish(),
            "onnx_conversion": conversion,
            "portability": _portability(request),
        }
        return CompileResult(engine_file=ENGINE_FILE, command=argv, report=report)


class _CacheRun:
    """The timing cache of one compile: checkout, retry without it, commit."""

    def __init__(self, request: CompileRequest, version: str, gpu: dict, work: Path) -> None:
        self.enabled = request.settings.timing_cache
        self.verify = request.settings.timing_cache_verify
        self.notes: list[str] = []
        self.reused, self.path = False, None
        if self.enabled:
            from mmaas.backends.tensorrt.timing_cache import CacheKey, TimingCacheStore

            self.key = CacheKey(version, gpu["compute_capability"], gpu["name"])
            self.store = TimingCacheStore(request.cache_dir)
            checkout = self.store.checkout(self.key, work)
            self.reused, self.path = checkout.reused, str(checkout.path)
            self.notes.append(checkout.note)

    def retry_without_stored(self) -> str:
        """Drop the stored cache and give a fresh path for the one retry."""
        self.store.discard(self.key)
        Path(self.path or "").unlink(missing_ok=True)
        self.notes.append(
            "the build failed with the stored timing cache; dropped it and retried once without it"
        )
        return self.path or ""

    def finish(self) -> dict[str, Any]:
        """Store what trtexec wrote; the report's ``timing_cache`` section."""
        if not self.enabled:
            return {"enabled": False}
        entry = self.store.commit(self.key, Path(self.path or ""))
        return {
            "enabled": True,
            "key": self.key.slug,
            "reused": self.reused,
            "verify": self.verify,
            "notes": self.notes,
            "stored_bytes": entry.size_bytes if entry else None,
        }


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


def _prepare_onnx(request: CompileRequest, version: str) -> tuple[Path, bool, dict | None]:
    from mmaas.backends.tensorrt.precision import convert_fp16, has_qdq

    precision = request.model.precision
    if precision in ("int8", "fp8"):
        return request.source, has_qdq(request.source), None
    if precision == "fp16" and parse_version(version)[0] >= 11:
        target = request.out_dir / EXPORTS_DIR / "model.fp16.onnx"
        target.parent.mkdir(parents=True, exist_ok=True)
        report = convert_fp16(
            request.source,
            target,
            request.model,
            request.settings.tolerance_atol,
            request.settings.tolerance_rtol,
        )
        return target, True, report
    return request.source, False, None


def _calibration(request: CompileRequest, settings: TensorRTSettings) -> str | None:
    name = settings.calibration_cache
    return str(request.source.parent / name) if name else None


def _run(argv: list[str], exports: Path, log_name: str = "trtexec.log") -> TrtexecLog:
    """Run trtexec, echoing its output (stderr merged, so [E] lines stay in order) to the
    build log and ``exports/log_name``; a failed run is parsed from the output's tail that
    ProcessError keeps."""
    try:
        text, code = proc.stream(argv, what="trtexec"), 0
    except ProcessError as exc:
        text, code = exc.output_tail, exc.returncode
    exports.mkdir(parents=True, exist_ok=True)
    (exports / log_name).write_text(text)
    return parse_trtexec_log(text, code)


def _check_engine(request: CompileRequest, log: TrtexecLog) -> None:
    engine = request.out_dir / ENGINE_FILE
    if not engine.is_file() or engine.stat().st_size == 0:
        raise BuildError(f"trtexec passed but wrote no engine at {engine}")
    asked = float(request.settings.workspace_mib)
    if log.workspace_mib is not None and abs(log.workspace_mib - asked) > WORKSPACE_TOLERANCE_MIB:
        raise BuildError(
            f"trtexec used a {log.workspace_mib} MiB workspace, model.yaml asks "
            f"{asked:g} MiB: the --memPoolSize spelling in mmaas.backends.tensorrt.releases "
            f"is wrong for TensorRT {log.tensorrt_version}"
        )


def _portability(request: CompileRequest) -> dict[str, Any]:
    return {
        "hardware_compatibility_level": request.settings.hardware_compatibility_level,
        "version_compatible": request.settings.version_compatible,
    }
