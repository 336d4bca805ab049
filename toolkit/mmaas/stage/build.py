"""What runs inside the builder stage (and for ``mmaas serve``, on the host):
compile -> profile check (each output's real shape against the served one:
:mod:`mmaas.stage.outputs`) -> gates (``checks:``) -> hash -> ``report.json`` +
``manifest.json``.

The command line (``python -m mmaas.stage``, the Dockerfile's contract) is in
:mod:`mmaas.stage.__main__`; its request files are :class:`mmaas.core.request.BuildRequest`
JSON written by the build plan: the engine request (the model's name and version neutral,
so the compile's Docker layer survives a rename or a version bump) and the build request.
A model directory appears whole or not at all: it is assembled in a sibling temp directory
and renamed into place. Each step prints one progress line on stderr (``mmaas stage:
compiling ...``, ``mmaas stage: profile check at opt (x: 2x3x640x640)``, ...), which
``mmaas build``'s display shows while the compile build runs (:mod:`mmaas.cli.progress`).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import mmaas
from mmaas.backends import CompileRequest, Engine, get_compiler
from mmaas.core.errors import BuildError
from mmaas.core.files import assembled, atomic_write_text
from mmaas.core.manifest import FileRecord, Manifest, ModelInfo, write_manifest
from mmaas.core.model_dir import REPORT_NAME
from mmaas.core.request import BuildRequest, Checks
from mmaas.core.sample_values import FORMS, value_inputs
from mmaas.core.samples import POINTS, profile_shape, sample_arrays, sample_inputs
from mmaas.stage.accuracy import accuracy_gate
from mmaas.stage.generation import generation_gate
from mmaas.stage.latency import LatencyProbe, latency_gate
from mmaas.stage.outputs import check_outputs


@dataclass(frozen=True)
class StageRequest:
    """A build request file as the stage uses it.

    Attributes:
        compile: what the compiler compiles (``out_dir`` left as ``.``), its settings read
            back into the back end's own type.
        spec_digest: ``sha256:<hex>`` recorded in the manifest.
        checks: the gates.
        samples: the accuracy gate's sample files (absolute paths).
        engine_key: the engine-cache key of this engine, or None.
    """

    compile: CompileRequest
    spec_digest: str
    checks: Checks
    samples: tuple[Path, ...]
    engine_key: str | None


def read_request(path: Path) -> StageRequest:
    """Parse a request file written by the build plan.

    Raises:
        BuildError: the file is missing or malformed.
    """
    try:
        request = BuildRequest.from_json(path.read_text())
        compiler = get_compiler(request.model.backend)
        compile_request = CompileRequest(
            model=request.model,
            source=(path.parent / request.source).resolve(),
            out_dir=Path("."),
            settings=compiler.read_settings(request.settings),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BuildError(f"{path}: unreadable build request ({exc})") from exc
    return StageRequest(
        compile_request,
        request.spec_digest,
        request.checks,
        tuple((path.parent / s).resolve() for s in request.samples),
        request.engine_key,
    )


def build_model_dir(
    request: CompileRequest,
    spec_digest: str,
    out_dir: Path,
    *,
    checks: Checks | None = None,
    samples: Sequence[Path] = (),
    engine_key: str | None = None,
) -> Manifest:
    """Compile, check over the profile, run the ``checks`` gates (``samples``: the accuracy
    gate's input files), hash, and write the model directory ``out_dir``.

    Raises:
        BuildError: the back end fails, or the engine does not run at one of the
            profile's min/opt/max shapes. GateFailed: a gate failed (carries its report).
    """
    compiler = get_compiler(request.model.backend)
    with assembled(out_dir) as work:
        started = time.perf_counter()
        progress(f"compiling {request.source.name} ({request.model.backend})")
        result = compiler.compile(replace(request, out_dir=work))
        progress(f"compiled {result.engine_file} in {time.perf_counter() - started:.1f} s")
        facts = compiler.runtime.describe()
        draft = Manifest(
            model=result.model or request.model,  # the engine's real bindings
            engine=FileRecord.of(work, result.engine_file),
            engine_data=tuple(FileRecord.of(work, name) for name in compiler.data_files(work)),
            source=FileRecord.of(request.source.parent, request.source.name),
            spec_digest=spec_digest,
            backend=facts,
            build={},
        )
        loading = time.perf_counter()
        engine = compiler.runtime.load(work, draft)
        load_ms = round((time.perf_counter() - loading) * 1000, 3)
        points = check_profile(engine, request.model)
        warnings = check_outputs(request.model, points, (checks or Checks()).stated_outputs)
        for warning in warnings:
            progress(f"warning: {warning}")
        report = {
            "compile": dict(result.report),
            "load_ms": load_ms,  # one instance, on the builder: what startup probes scale
            "profile_check": points,
            "warnings": warnings,
            **run_gates(
                engine, request, checks or Checks(), samples, compiler.latency_probe(work, draft)
            ),
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
    checks: Checks,
    samples: Sequence[Path],
    probe: LatencyProbe | None,
) -> dict[str, Any]:
    """Run the accuracy, latency and generation gates ``checks`` declares; their reports
    by name (``{"accuracy": ..., "latency": ..., "generation": ...}``, only those declared).

    Raises:
        GateFailed: a gate failed. BuildError: a sample file cannot be read.
    """
    reports: dict[str, Any] = {}
    names = [tensor.name for tensor in request.model.inputs]
    if checks.accuracy is not None:
        generation = Path(checks.generation.samples).name if checks.generation else None
        mine = [sample for sample in samples if sample.name != generation]
        progress(f"accuracy gate over {len(mine)} sample file(s)")
        loaded = [(sample.name, _sample(sample, names)) for sample in mine]
        reports["accuracy"] = accuracy_gate(
            engine, request.model, request.source, checks.accuracy, loaded
        )
    if checks.latency is not None:
        progress("latency gate")
        reports["latency"] = latency_gate(engine, request.model, checks.latency, probe)
    if checks.generation is not None:
        name = Path(checks.generation.samples).name
        progress(f"generation gate on {name}")
        sample = next(s for s in samples if s.name == name)
        reports["generation"] = generation_gate(engine, request.model, checks.generation, sample)
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
        described = ", ".join(f"{n}: {'x'.join(map(str, s))}" for n, s in shapes.items())
        progress(f"profile check at {point} ({described})")
        started = time.perf_counter()
        try:
            outputs = engine.infer(inputs, names)
        except Exception as exc:  # the back end's own error type
            raise BuildError(
                f"profile check failed at the {point} shapes ({described}): {exc}",
                hint=_failure_hint(model),
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


def _failure_hint(model: ModelInfo) -> str:
    """What to change when the engine fails over the profile: the integer inputs' values
    first (random 0..7 unless ``sample_values`` says otherwise), then the profile."""
    shapes = (
        "narrow the profile in model.yaml or fix the export so it holds for every shape "
        "between min and max"
    )
    named = value_inputs(model.inputs)
    if not named:
        return f"the engine does not run at these shapes with random inputs; {shapes}"
    listed = ", ".join(repr(name) for name in named)
    return (
        f"the engine ran on random values: integers 0..7 for {listed}; if an input's values "
        f"matter (a sample rate, a length, an index), give them under sample_values in "
        f"model.yaml, e.g. inputs: [{{name: {named[0]!r}, sample_values: 16000}}] "
        f"({FORMS}); otherwise {shapes}"
    )


def progress(message: str) -> None:
    """Print one progress line of the stage on stderr: ``mmaas stage: <message>``."""
    print(f"mmaas stage: {message}", file=sys.stderr, flush=True)


def _sample(path: Path, names: list[str]) -> dict[str, Any]:
    try:
        return sample_arrays(path, names)
    except (OSError, ValueError) as exc:
        raise BuildError(f"accuracy gate: sample {path.name}: {exc}") from exc
