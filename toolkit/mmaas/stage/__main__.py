"""``python -m mmaas.stage``: the builder stage's command line (the Dockerfile's contract)::

    python -m mmaas.stage build REQUEST.json OUT_DIR             # compile into OUT_DIR
    python -m mmaas.stage stamp REQUEST.json TREE OUT_DIR        # adopt built engines
    python -m mmaas.stage verify MODEL_DIR                       # re-check hashes

``build``'s ``REQUEST.json`` is a :class:`mmaas.core.request.BuildRequest` (one engine),
``stamp``'s a :class:`mmaas.core.model_request.ModelRequest`, both written by the build
plan. ``stamp`` turns the staged tree of engine directories -- just compiled, or verified
engine-cache entries -- and assets into this model's directory (:mod:`mmaas.stage.stamp`).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

from mmaas.core.errors import MmaasError
from mmaas.core.model_dir import describe, verify_model_dir
from mmaas.stage.accuracy import GateFailed
from mmaas.stage.build import build_model_dir, read_request
from mmaas.stage.stamp import read_model_request, stamp_model_dir


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
            model_request = read_model_request(Path(argv[1]))
            model = stamp_model_dir(Path(argv[2]), Path(argv[3]), model_request)
            print(f"stamped {model.name} {model.version}: {describe(model)}")
            return 0
        if len(argv) == 2 and argv[0] == "verify":
            model = verify_model_dir(Path(argv[1]))
            print(f"model verified: {model.name} {model.version}: {describe(model)}")
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
        "TREE OUT_DIR | verify MODEL_DIR",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
