"""What runs inside the builder stage (and for ``mmaas serve``, on the host):
compile -> profile check -> gates (``checks:``) -> hash -> ``report.json`` + ``manifest.json``.

Command line (the Dockerfile's contract)::

    python -m mmaas.stage build REQUEST.json OUT_DIR             # compile into OUT_DIR
    python -m mmaas.stage stamp REQUEST.json ENGINE_DIR OUT_DIR  # adopt a built engine
    python -m mmaas.stage verify MODEL_DIR                       # re-check hashes

``REQUEST.json`` is written by the build plan: ``{"model": ModelInfo as a dict, "settings":
spec.build as a dict, "spec_digest": "sha256:...", "source": path of the ONNX file relative
to the request file, "checks": spec.checks as a dict, "samples": sample files relative to
the request file, "engine_key": "sha256:..." or null}``. The plan writes two: the engine
request (the model's name and version neutral, so the compile's Docker layer survives a
rename or a version bump) and the build request. ``stamp`` turns an engine directory --
just compiled, or a verified engine-cache entry -- into this model's directory
(:mod:`mmaas.core.model_dir`). A model directory appears whole or not at all: it is assembled
in a sibling temp directory and renamed into place.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import mmaas
from mmaas.backends import Backend, CompileRequest, Engine, get_backend
from mmaas.core.errors import BuildError, MmaasError
from mmaas.core.manifest import (
    FileRecord,
    Manifest,
    ModelInfo,
    atomic_write_text,
    model_info_from_dict,
    write_manifest,
)
from mmaas.core.model_dir import REPORT_NAME, assembled, stamp_model_dir, verify_model_dir
from mmaas.core.samples import POINTS, profile_shape, sample_inputs
from mmaas.stage.accuracy import GateFailed, accuracy_gate, sample_arrays
from mmaas.stage.latency import LatencyProbe, latency_gate


@dataclass(frozen=True)
class StageRequest:
    """A parsed request file (see the module docstring).

    Attributes:
        compile: what the back end compiles (``out_dir`` left as ``.``).
        spec_digest: ``sha256:<hex>`` recorded in the manifest.
        checks: ``checks:`` of model.yaml as a dict (``accuracy`` / ``latency`` or None).
        samples: the accuracy gate's sample files (absolute paths).
        engine_key: the engine-cache key of this engine, or None.
    """

    compile: CompileRequest
    spec_digest: str
    checks: Mapping[str, Any] = field(default_factory=dict)
    samples: tuple[Path, ...] = ()
    engine_key: str | None = None


def read_request(path: Path) -> StageRequest:
    """Parse a request file written by the build plan.

    Raises:
        BuildError: the file is missing or malformed.
    """
    try:
        raw = json.loads(path.read_text())
        request = CompileRequest(
            model=model_info_from_dict(raw["model"]),
            source=(path.parent / raw["source"]).resolve(),
            out_dir=Path("."),
            settings=raw.get("settings", {}),
        )
        return StageRequest(
            request,
            raw["spec_digest"],
            raw.get("checks") or {},
            tuple((path.parent / s).resolve() for s in raw.get("samples", [])),
            raw.get("engine_key"),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BuildError(f"{path}: unreadable build request ({exc})") from exc


def build_model_dir(
    request: CompileRequest,
    spec_digest: str,
    out_dir: Path,
    *,
    checks: Mapping[str, Any] | None = None,
    samples: Sequence[Path] = (),
    engine_key: str | None = None,
) -> Manifest:
    """Compile, check over the profile, run the ``checks`` gates (``samples``: the accuracy
    gate's input files), hash, and write the model directory ``out_dir``.

    Raises:
        BuildError: the back end fails, or the engine does not run at one of the
            profile's min/opt/max shapes. GateFailed: a gate failed (carries its report).
    """
    backend = get_backend(request.model.backend)
    with assembled(out_dir) as work:
        started = time.perf_counter()
        result = backend.compile(replace(request, out_dir=work))
        facts = backend.describe()
        draft = Manifest(
            model=request.model,
            engine=FileRecord.of(work, result.engine_file),
            engine_data=tuple(FileRecord.of(work, name) for name in _data_files(backend, work)),
            source=FileRecord.of(request.source.parent, request.source.name),
            spec_digest=spec_digest,
            backend=facts,
            build={},
        )
        engine = backend.load(work, draft)
        report = {
            "compile": dict(result.report),
            "profile_check": check_profile(engine, request.model),
            **run_gates(engine, request, checks or {}, samples, _probe(backend, work, draft)),
        }
        atomic_write_text(work / REPORT_NAME, json.dumps(report, indent=2) + "\n")
        build = {
            "mmaas_version": mmaas.__version__,
            "command": list(result.command),
            "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "duration_ms": round((time.perf_counter() - started) * 1000, 3),
            "engine_key": engine_key,
        }
        return write_manifest(work, replace(draft, report=report, build=build))


def run_gates(
    engine: Engine,
    request: CompileRequest,
    checks: Mapping[str, Any],
    samples: Sequence[Path],
    probe: LatencyProbe | None,
) -> dict[str, Any]:
    """Run the accuracy and latency gates ``checks`` declares; their reports by name
    (``{"accuracy": ..., "latency": ...}``, only those declared).

    Raises:
        GateFailed: a gate failed. BuildError: a sample file cannot be read.
    """
    reports: dict[str, Any] = {}
    names = [tensor.name for tensor in request.model.inputs]
    if checks.get("accuracy") is not None:
        loaded = [(sample.name, _sample(sample, names)) for sample in samples]
        reports["accuracy"] = accuracy_gate(
            engine, request.model, request.source, checks["accuracy"], loaded
        )
    if checks.get("latency") is not None:
        reports["latency"] = latency_gate(engine, request.model, checks["latency"], probe)
    return reports


def check_profile(engine: Engine, model: ModelInfo) -> list[dict[str, Any]]:
    """Run the engine once at the min, opt and max shapes of every input.

    Returns one entry per point: ``{"point", "shapes": {input: [dims]}, "latency_ms",
    "outputs": {output: [dims]}}``.

    Raises:
        BuildError: naming the point, the shapes and the engine's own error, when the
            engine fails at a shape the profile promises (e.g. an export that only runs at
            its traced size).
    """
    names = [tensor.name for tensor in model.outputs]
    checks = []
    for point in POINTS:
        shapes = {t.name: list(profile_shape(t, point)) for t in model.inputs}
        inputs = sample_inputs(model, point)
        started = time.perf_counter()
        try:
            outputs = engine.infer(inputs, names)
        except Exception as exc:  # the back end's own error type
            described = ", ".join(f"{n}: {'x'.join(map(str, s))}" for n, s in shapes.items())
            raise BuildError(
                f"profile check failed at the {point} shapes ({described}): {exc}",
                hint="the engine does not run over the optimization profile in model.yaml; "
                "narrow the profile or fix the export so it holds for every shape "
                "between min and max",
            ) from exc
        checks.append(
            {
                "point": point,
                "shapes": shapes,
                "latency_ms": round((time.perf_counter() - started) * 1000, 3),
                "outputs": {n: list(v.shape) for n, v in outputs.items()},
            }
        )
    return checks


def main(argv: list[str]) -> int:
    """Entry point of ``python -m mmaas.stage``; returns the exit code. A failed gate
    prints its report (JSON) on stderr before the one-line error."""
    try:
        if len(argv) == 3 and argv[0] == "build":
            request = read_request(Path(argv[1]))
            manifest = build_model_dir(
                request.compile,
                request.spec_digest,
                Path(argv[2]),
                checks=request.checks,
                samples=request.samples,
                engine_key=request.engine_key,
            )
            summary = {key: manifest.report[key] for key in manifest.report if key != "compile"}
            engine = {
                "engine": asdict(manifest.engine),
                "engine_data": [asdict(data) for data in manifest.engine_data],
            }
            print(json.dumps({**engine, **summary}, indent=2))
            return 0
        if len(argv) == 4 and argv[0] == "stamp":
            request = read_request(Path(argv[1]))
            manifest = stamp_model_dir(
                Path(argv[2]),
                Path(argv[3]),
                request.compile.model,
                request.spec_digest,
                request.engine_key,
            )
            print(
                f"engine stamped for {manifest.model.name} {manifest.model.version}: "
                f"{manifest.engine.path} {manifest.engine.blake3}"
            )
            return 0
        if len(argv) == 2 and argv[0] == "verify":
            manifest = verify_model_dir(Path(argv[1]))
            print(
                f"engine verified: {manifest.engine.path} {manifest.engine.blake3}"
                + "".join(f", {data.path} {data.blake3}" for data in manifest.engine_data)
            )
            return 0
    except GateFailed as exc:
        print(json.dumps(exc.report, indent=2), file=sys.stderr)
        print(f"mmaas stage: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except MmaasError as exc:
        print(f"mmaas stage: error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(
        "usage: python -m mmaas.stage build REQUEST.json OUT_DIR | stamp REQUEST.json "
        "ENGINE_DIR OUT_DIR | verify MODEL_DIR",
        file=sys.stderr,
    )
    return 2


def _probe(backend: Backend, directory: Path, manifest: Manifest) -> LatencyProbe | None:
    """The back end's own latency timer, when it has one: ``measure_latency(directory,
    manifest, shapes, runs, warmup) -> {"p50_ms", "p90_ms", "p99_ms", "mean_ms", "max_ms",
    "timer"}`` (the hook the TensorRT back end implements with trtexec)."""
    measure = getattr(backend, "measure_latency", None)
    if measure is None:
        return None
    return lambda shapes, runs, warmup: measure(directory, manifest, shapes, runs, warmup)


def _data_files(backend: Backend, directory: Path) -> tuple[str, ...]:
    """The engine's data files the back end wrote beside it (its ``data_files(directory)
    -> (name, ...)`` hook: ONNX Runtime's external initializers), recorded in the manifest
    as ``engine_data``; none for a back end without the hook (a TensorRT plan is one file)."""
    listed = getattr(backend, "data_files", None)
    return () if listed is None else tuple(listed(directory))


def _sample(path: Path, names: list[str]) -> dict[str, Any]:
    try:
        return sample_arrays(path, names)
    except (OSError, ValueError) as exc:
        raise BuildError(f"accuracy gate: sample {path.name}: {exc}") from exc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
