"""What runs inside the builder stage (and for ``mmaas serve``, on the host):
compile -> profile check -> hash -> ``report.json`` + ``manifest.json``.

Command line (the Dockerfile's contract)::

    python -m mmaas.stage build BUILD_REQUEST.json OUT_DIR   # compile into OUT_DIR
    python -m mmaas.stage verify MODEL_DIR                   # re-check hashes

``BUILD_REQUEST.json`` is written by the build plan: ``{"model": ModelInfo as a dict,
"settings": spec.build as a dict, "spec_digest": "sha256:...", "source": path of the ONNX
file relative to the request file}``. The model directory appears whole or not at all: it
is assembled in a sibling temp directory and renamed into place.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import mmaas
from mmaas.backends import CompileRequest, Engine, get_backend
from mmaas.errors import BuildError, MmaasError
from mmaas.manifest import (
    FileRecord,
    Manifest,
    ModelInfo,
    atomic_write_text,
    model_info_from_dict,
    read_manifest,
    verify_engine,
    write_manifest,
)
from mmaas.samples import POINTS, profile_shape, sample_inputs

REPORT_NAME = "report.json"


def read_request(path: Path) -> tuple[CompileRequest, str]:
    """Parse a build request file into a CompileRequest (``out_dir`` left as ``.``) and
    the spec digest.

    Raises:
        BuildError: the file is missing or malformed.
    """
    try:
        raw = json.loads(path.read_text())
        request = CompileRequest(model=model_info_from_dict(raw["model"]),
                                 source=(path.parent / raw["source"]).resolve(),
                                 out_dir=Path("."), settings=raw.get("settings", {}))
        return request, raw["spec_digest"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BuildError(f"{path}: unreadable build request ({exc})") from exc


def build_model_dir(request: CompileRequest, spec_digest: str, out_dir: Path) -> Manifest:
    """Compile, check over the profile, hash, and write the model directory ``out_dir``.

    Raises:
        BuildError: the back end fails, or the engine does not run at one of the
            profile's min/opt/max shapes.
    """
    backend = get_backend(request.model.backend)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}."))
    work.chmod(0o755)  # readable by the runtime's non-root user
    try:
        started = time.perf_counter()
        result = backend.compile(CompileRequest(model=request.model, source=request.source,
                                                out_dir=work, settings=request.settings,
                                                cache_dir=request.cache_dir))
        facts = backend.describe()
        draft = Manifest(model=request.model, engine=FileRecord.of(work, result.engine_file),
                         source=FileRecord.of(request.source.parent, request.source.name),
                         spec_digest=spec_digest, backend=facts, build={})
        checks = check_profile(backend.load(work, draft), request.model)
        report = {"compile": dict(result.report), "profile_check": checks}
        atomic_write_text(work / REPORT_NAME, json.dumps(report, indent=2) + "\n")
        manifest = Manifest(
            model=draft.model, engine=draft.engine, source=draft.source,
            spec_digest=spec_digest, backend=facts, report=report,
            build={"mmaas_version": mmaas.__version__, "command": list(result.command),
                   "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                   "duration_ms": round((time.perf_counter() - started) * 1000, 3)})
        manifest = write_manifest(work, manifest)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        work.rename(out_dir)
        return manifest
    finally:
        shutil.rmtree(work, ignore_errors=True)


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
                     "between min and max") from exc
        checks.append({"point": point, "shapes": shapes,
                       "latency_ms": round((time.perf_counter() - started) * 1000, 3),
                       "outputs": {n: list(v.shape) for n, v in outputs.items()}})
    return checks


def verify_model_dir(directory: Path) -> Manifest:
    """Read and self-check the manifest, then re-hash the engine against it.

    Raises:
        IntegrityError: the manifest was altered or the engine differs from it.
    """
    manifest = read_manifest(directory)
    verify_engine(directory, manifest)
    return manifest


def main(argv: list[str]) -> int:
    """Entry point of ``python -m mmaas.stage``; returns the exit code."""
    try:
        if len(argv) == 3 and argv[0] == "build":
            request, digest = read_request(Path(argv[1]))
            manifest = build_model_dir(request, digest, Path(argv[2]))
            print(json.dumps({"engine": asdict(manifest.engine),
                              "profile_check": manifest.report["profile_check"]}, indent=2))
            return 0
        if len(argv) == 2 and argv[0] == "verify":
            manifest = verify_model_dir(Path(argv[1]))
            print(f"engine verified: {manifest.engine.path} {manifest.engine.blake3}")
            return 0
    except MmaasError as exc:
        print(f"mmaas stage: error: {exc}", file=sys.stderr)
        return exc.exit_code
    print("usage: python -m mmaas.stage build REQUEST.json OUT_DIR | verify MODEL_DIR",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
