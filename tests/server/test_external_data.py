"""The server's start-up check covers an engine's data file (ONNX external data): it serves
a model directory whose weights sit in ``model.ort.onnx.data`` and refuses to start when
that file was altered."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as triton

from mmaas.backends import CompileRequest
from mmaas.stage.build import build_model_dir
from onnx_builder import EXTERNAL_INFO as INFO
from onnx_builder import ORT_SETTINGS, external_data_model

from .conftest import RunningServer
from .test_app import refused

StartServer = Callable[..., RunningServer]


@pytest.fixture
def external(tmp_path: Path) -> tuple[Path, Path]:
    """(source ONNX file with external data, model directory compiled from it)."""
    source = external_data_model(tmp_path / "source")
    out = tmp_path / "model"
    build_model_dir(CompileRequest(INFO, source, out, ORT_SETTINGS), "sha256:spec", out)
    return source, out


def test_serves_an_engine_with_a_data_file(
    start_server: StartServer, external: tuple[Path, Path]
) -> None:
    source, out = external
    x = np.random.default_rng(3).standard_normal((2, 64)).astype(np.float32)
    expected = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"]).run(
        ["y"], {"x": x}
    )[0]
    server = start_server(out)
    tensor = triton.InferInput("x", [2, 64], "FP32")
    tensor.set_data_from_numpy(x)
    result = server.client().infer(INFO.name, [tensor]).as_numpy("y")
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-4)


def test_refuses_a_tampered_data_file(
    start_server: StartServer, external: tuple[Path, Path]
) -> None:
    _, out = external
    data = out / "model.ort.onnx.data"
    blob = bytearray(data.read_bytes())
    blob[0] ^= 0xFF
    data.write_bytes(bytes(blob))
    line = refused(start_server(out, wait=False))
    assert "model.ort.onnx.data: engine data does not match its manifest" in line
    assert "refusing to use it" in line
