"""TensorRT engine back end (NVIDIA GPUs).

compile: runs ``trtexec`` (argv from :func:`mmaas.backends.tensorrt.trtexec.argv.trtexec_argv`) through
:mod:`mmaas.core.proc`, parses its log (:mod:`mmaas.backends.tensorrt.trtexec.log`) into the build report, and
keeps the timing cache in the host store (:mod:`mmaas.backends.tensorrt.timing_cache`): a build that fails
with a stored cache drops it and retries once without it, and says so. On TensorRT 11
(strongly typed only) an fp16 target is converted in the builder first and checked against
the fp32 graph (:mod:`mmaas.backends.tensorrt.precision`); int8/fp8 builds look for Q/DQ nodes.
load: :class:`~mmaas.backends.tensorrt.engine.TensorRTEngine` (TensorRT Python API +
cuda-python, imported only there). describe /
check_compatible: GPU name, compute capability, driver, CUDA and TensorRT versions; an
engine is refused on another compute capability or TensorRT version unless built with
hardware / version compatibility, and on a driver older than its CUDA needs (C9, C10, C12).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mmaas.backends import CompileRequest, CompileResult
from mmaas.backends.tensorrt.compat import check_host
from mmaas.backends.tensorrt.gpu import no_gpu_message, query_gpus
from mmaas.backends.tensorrt.releases import min_driver, parse_version
from mmaas.backends.tensorrt.trtexec.argv import trtexec_argv
from mmaas.backends.tensorrt.trtexec.log import TrtexecLog, parse_trtexec_log
from mmaas.core import proc
from mmaas.core.errors import BuildError, ProcessError
from mmaas.core.manifest import Manifest

ENGINE_FILE = "model.plan"
EXPORTS_DIR = "trtexec"
TRTEXEC_PATHS = ("/usr/src/tensorrt/bin/trtexec", "/usr/bin/trtexec")
WORKSPACE_TOLERANCE_MIB = 0.5


class TensorRTBackend:
    """The GPU back end; see the module docstring."""

    name = "tensorrt"

    def compile(self, request: CompileRequest) -> CompileResult:
        """Build ``out_dir/model.plan`` with trtexec on this host's first GPU.

        Raises:
            BuildError: no GPU (naming the routes that give a build one), TensorRT is not
                the pinned release, the spec needs a flag this trtexec lacks, trtexec fails
                (its ``[E]`` lines), or the engine is missing/empty or got another workspace.
        """
        facts = self.describe()
        if not facts["gpu"]:
            raise BuildError(no_gpu_message(facts["problem"]))
        version = _require_release(facts["version"], request.settings)
        onnx, typed, conversion = _prepare_onnx(request, version)
        exports = request.out_dir / EXPORTS_DIR
        exports.mkdir(parents=True, exist_ok=True)
        cache = _CacheRun(request, version, facts["gpu"], exports)

        def argv_for(timing_cache: str | None) -> list[str]:
            trt = request.settings.get("tensorrt", {})
            return trtexec_argv(
                request.model,
                request.settings,
                version,
                str(onnx),
                str(request.out_dir / ENGINE_FILE),
                timing_cache,
                exports_dir=str(exports),
                calibration_cache=_calibration(request, trt),
                typed_graph=typed,
                compute_capability=facts["gpu"]["compute_capability"],
                verify_cache=bool(trt.get("timing_cache_verify")),
                trtexec=_trtexec(),
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

    def load(self, directory: Path, manifest: Manifest, threads: int = 0) -> Any:
        """Deserialize ``directory/model.plan`` (``threads`` is unused: the GPU runs it)."""
        from mmaas.backends.tensorrt.engine import TensorRTEngine

        return TensorRTEngine(directory / manifest.engine.path, manifest.model)

    def describe(self) -> dict[str, Any]:
        """``{"name", "version" (TensorRT), "gpu": {"name", "compute_capability"} | None,
        "driver_version", "driver_cuda", "cuda_version" (runtime), "min_driver",
        "problem"}``, from nvidia-smi, the tensorrt module (or trtexec's banner) and
        ``CUDA_VERSION`` (set by NVIDIA's images)."""
        report = query_gpus()
        first = report.gpus[0] if report.gpus else None
        cuda = os.environ.get("CUDA_VERSION")
        return {
            "name": self.name,
            "version": tensorrt_version(),
            "gpu": {"name": first.name, "compute_capability": first.compute_capability}
            if first
            else None,
            "driver_version": first.driver_version if first else None,
            "driver_cuda": report.driver_cuda,
            "cuda_version": cuda,
            "min_driver": min_driver(cuda) if cuda else None,
            "problem": report.problem,
        }

    def measure_latency(
        self,
        directory: Path,
        manifest: Manifest,
        shapes: Mapping[str, tuple[int, ...]],
        runs: int,
        warmup: int,
    ) -> dict[str, Any]:
        """The latency gate's timer: ``trtexec --loadEngine`` of ``directory``'s engine,
        ``runs`` timed inferences at ``shapes`` (argv:
        :func:`mmaas.backends.tensorrt.latency.latency_argv`). Returns ``{"p50_ms",
        "p90_ms", "p99_ms", "mean_ms", "max_ms", "timer"}`` in ms.

        Raises:
            BuildError: trtexec failed, printed no latency summary, or is older than 8.5.
        """
        from mmaas.backends.tensorrt.latency import latency_argv, latency_figures

        version = manifest.backend.get("version") or tensorrt_version() or ""
        engine = directory / manifest.engine.path
        argv = latency_argv(_trtexec(), engine, manifest.model, version, shapes, runs, warmup)
        return latency_figures(_run(argv, directory / EXPORTS_DIR, "trtexec-latency.log"), runs)

    def check_compatible(self, manifest: Manifest) -> None:
        """Refuse to serve an engine this host cannot run, before readiness.

        Raises:
            CompatibilityError: "built for X, running on Y": no GPU, another compute
                capability (unless built ``ampere+`` and this GPU is sm80+), another
                TensorRT version (unless version compatible and this one is newer), or a
                driver older than the engine's CUDA needs.
        """
        portability = manifest.report.get("compile", {}).get("portability", {})
        check_host(manifest.backend, self.describe(), portability)


class _CacheRun:
    """The timing cache of one compile: checkout, retry without it, commit."""

    def __init__(self, request: CompileRequest, version: str, gpu: dict, work: Path) -> None:
        self.enabled = bool(request.settings.get("timing_cache", True))
        self.verify = bool(request.settings.get("tensorrt", {}).get("timing_cache_verify"))
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


def _require_release(installed: str | None, settings: Mapping[str, Any]) -> str:
    pinned = str(settings.get("tensorrt", {}).get("version", ""))
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
        trt = request.settings.get("tensorrt", {})
        target = request.out_dir / EXPORTS_DIR / "model.fp16.onnx"
        target.parent.mkdir(parents=True, exist_ok=True)
        report = convert_fp16(
            request.source,
            target,
            request.model,
            float(trt.get("tolerance_atol", 0.02)),
            float(trt.get("tolerance_rtol", 0.02)),
        )
        return target, True, report
    return request.source, False, None


def _calibration(request: CompileRequest, trt: dict) -> str | None:
    name = trt.get("calibration_cache")
    return str(request.source.parent / name) if name else None


def _trtexec() -> str:
    return shutil.which("trtexec") or next(
        (p for p in TRTEXEC_PATHS if Path(p).is_file()), "trtexec"
    )


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
    asked = float(request.settings.get("workspace", 2048))
    if log.workspace_mib is not None and abs(log.workspace_mib - asked) > WORKSPACE_TOLERANCE_MIB:
        raise BuildError(
            f"trtexec used a {log.workspace_mib} MiB workspace, model.yaml asks "
            f"{asked:g} MiB: the --memPoolSize spelling in mmaas.backends.tensorrt.releases is wrong "
            f"for TensorRT {log.tensorrt_version}"
        )


def _portability(request: CompileRequest) -> dict[str, Any]:
    trt = request.settings.get("tensorrt", {})
    return {
        "hardware_compatibility_level": trt.get("hardware_compatibility_level", "none"),
        "version_compatible": bool(trt.get("version_compatible", False)),
    }


def tensorrt_version() -> str | None:
    try:
        import tensorrt

        return str(tensorrt.__version__)
    except ImportError:
        if shutil.which(_trtexec()) is None:
            return None
        done = proc.run([_trtexec(), "--help"], check=False, what="trtexec --help")
        return parse_trtexec_log(done.stdout + done.stderr).tensorrt_version
