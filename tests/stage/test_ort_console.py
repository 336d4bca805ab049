"""ONNX Runtime's own console lines (ANSI-coloured ``[E:onnxruntime:...]`` /
``[W:onnxruntime:...]``) stay out of the builder's and the server's logs: a reflect Pad
that fails at the profile's min length (onnx_builder.reflect_pad_model) fails the real
builder stage (``python -m mmaas.stage build``) and a served engine's request with
mmaas's one message and nothing from ONNX Runtime's logger on stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path

from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.core.request import BuildRequest, Checks
from onnx_builder import ORT_SETTINGS, reflect_pad_model

SHORT = ModelInfo(
    name="pad",
    version="1",
    backend="onnxruntime",
    precision="fp32",
    max_batch_size=0,
    inputs=(TensorInfo("x", "FP32", (1, 2, -1), (1, 2, 2), (1, 2, 8), (1, 2, 16)),),
    outputs=(TensorInfo("y", "FP32", (1, 2, -1)),),
)
SERVE = """
import sys
from pathlib import Path
import numpy as np
from mmaas.backends import get_runtime
from mmaas.core.manifest import read_manifest
directory = Path(sys.argv[1])
engine = get_runtime("onnxruntime").load(directory, read_manifest(directory))
try:
    engine.infer({"x": np.ones((1, 2, 2), np.float32)}, ["y"])
except Exception as exc:
    print("refused:", type(exc).__name__)
"""


def no_ort_lines(stderr: str) -> None:
    assert "\x1b[" not in stderr, stderr
    assert ":onnxruntime:" not in stderr, stderr


def stage_build(tmp_path: Path, model: ModelInfo) -> subprocess.CompletedProcess[str]:
    source = reflect_pad_model(tmp_path / "pad.onnx")
    request = tmp_path / "request.json"
    body = BuildRequest(model, str(source), asdict(ORT_SETTINGS), Checks(), (), "sha256:x", None)
    request.write_text(body.to_json())
    argv = [sys.executable, "-m", "mmaas.stage", "build", str(request), str(tmp_path / "out")]
    return subprocess.run(argv, capture_output=True, text=True, check=False)


def test_builder_stage_failure_has_no_onnxruntime_console_lines(tmp_path: Path) -> None:
    done = stage_build(tmp_path, SHORT)
    assert done.returncode == 1
    assert "profile check failed at the min shapes (x: 1x2x2)" in done.stderr
    no_ort_lines(done.stderr)


def test_served_engine_failure_has_no_onnxruntime_console_lines(tmp_path: Path) -> None:
    x = TensorInfo("x", "FP32", (1, 2, -1), (1, 2, 4), (1, 2, 8), (1, 2, 16))
    long_enough = replace(SHORT, inputs=(x,))
    assert stage_build(tmp_path, long_enough).returncode == 0
    done = subprocess.run(
        [sys.executable, "-c", SERVE, str(tmp_path / "out")], capture_output=True, text=True
    )
    assert done.stdout.startswith("refused:"), done
    no_ort_lines(done.stderr)


FAKE_ORT = """import os
os.write(2, b"\\x1b[0;93m2026-12-01 [W:onnxruntime:Default, telemetry_1ds.cc:613 operator()] "
         b"Failed to persist telemetry device ID; using an in-memory identifier\\x1b[m\\n")
"""
IMPORT = """
import logging, sys
logging.basicConfig(level=logging.DEBUG if sys.argv[1] == "debug" else logging.INFO)
from mmaas.core.ort_io import import_onnxruntime
import_onnxruntime()
print("imported")
"""


def test_fake_onnxruntime_import_time_lines_go_to_the_debug_log(tmp_path: Path) -> None:
    """What onnxruntime prints while it is imported (the image's user 10001 has no
    writable home: "Failed to persist telemetry device ID", ANSI-coloured; the module is
    FAKED here, the real one is checked in tests/build/test_bf16_image_e2e.py) never
    reaches the console; with DEBUG logging it is one plain line on the mmaas logger."""
    (tmp_path / "onnxruntime").mkdir()
    (tmp_path / "onnxruntime" / "__init__.py").write_text(FAKE_ORT)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    for level in ("info", "debug"):
        done = subprocess.run(
            [sys.executable, "-c", IMPORT, level], capture_output=True, text=True, env=env
        )
        assert done.stdout == "imported\n", done
        assert "\x1b[" not in done.stderr
        if level == "info":
            assert "telemetry" not in done.stderr, done.stderr
    assert "DEBUG:mmaas.onnxruntime:2026-12-01 [W:onnxruntime:Default" in done.stderr
    assert "Failed to persist telemetry device ID" in done.stderr
