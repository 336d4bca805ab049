"""ONNX Runtime's own console lines (ANSI-coloured ``[E:onnxruntime:...]`` /
``[W:onnxruntime:...]``) stay out of the builder's and the server's logs: a reflect Pad
that fails at the profile's min length (onnx_builder.reflect_pad_model) fails the real
builder stage (``python -m mmaas.stage build``) and a served engine's request with
mmaas's one message and nothing from ONNX Runtime's logger on stderr."""

from __future__ import annotations

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
