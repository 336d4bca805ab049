"""Server life cycle: health transitions, refusal to start on anything it cannot trust
(exit 1, one clear line on stderr), settings errors, and the runtime import layering."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as triton
from tritonclient.utils import InferenceServerException

from mmaas.core.manifest import read_manifest, write_manifest

from .conftest import RunningServer

StartServer = Callable[..., RunningServer]


@pytest.fixture
def model_copy(two_outputs_dir: Path, tmp_path: Path) -> Path:
    """A private copy of a small model directory that a test may damage."""
    return Path(shutil.copytree(two_outputs_dir, tmp_path / "model"))


def refused(server: RunningServer) -> str:
    """The server must exit 1 with exactly one line on stderr, no traceback; returns it."""
    assert server.process.wait(60) == 1, server.stderr()
    lines = server.stderr().strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in lines[0], server.stderr()
    assert lines[0].startswith("mmaas server: error: ")
    return lines[0]


def test_health_not_serving_until_warmed_up_then_serving_then_drained(
    start_server: StartServer, det_dir: Path
) -> None:
    server = start_server(det_dir, wait=False, MMAAS_WARMUP_RUNS="10")
    while (status := server.health(timeout=0.5)) == "UNREACHABLE":
        assert server.process.poll() is None, server.stderr()
    assert status == "NOT_SERVING"
    client = server.client()
    assert client.is_server_live()
    assert not client.is_server_ready() and not client.is_model_ready("ppocr-det")
    tensor = triton.InferInput("x", [1, 3, 32, 32], "FP32")
    tensor.set_data_from_numpy(np.zeros((1, 3, 32, 32), np.float32))
    with pytest.raises(InferenceServerException) as info:
        client.infer("ppocr-det", [tensor])
    assert info.value.status() == "StatusCode.UNAVAILABLE"
    assert "not ready yet" in info.value.message()
    server.wait_serving()
    assert client.is_server_ready() and client.is_model_ready("ppocr-det")
    assert "10 warm-up runs at x: 1x3x640x640" in server.stderr()
    assert server.stop() == 0
    assert "draining" in server.stderr()


def test_refuses_a_tampered_engine(start_server: StartServer, model_copy: Path) -> None:
    engine = model_copy / read_manifest(model_copy).engine.path
    data = bytearray(engine.read_bytes())
    data[-1] ^= 0xFF
    engine.write_bytes(bytes(data))
    line = refused(start_server(model_copy, wait=False))
    assert "engine does not match its manifest" in line and "refusing" in line


def test_refuses_an_altered_manifest(start_server: StartServer, model_copy: Path) -> None:
    path = model_copy / "manifest.json"
    raw = json.loads(path.read_text())
    raw["model"]["max_batch_size"] = 64
    path.write_text(json.dumps(raw))
    assert "manifest was altered after the build" in refused(start_server(model_copy, wait=False))


def test_refuses_an_engine_other_than_the_pinned_one(
    start_server: StartServer, model_copy: Path
) -> None:
    pin = "blake3:" + "0" * 64
    line = refused(start_server(model_copy, wait=False, MMAAS_EXPECTED_ENGINE=pin))
    assert f"MMAAS_EXPECTED_ENGINE pins {pin}" in line


def test_serves_the_pinned_engine(start_server: StartServer, model_copy: Path) -> None:
    pin = read_manifest(model_copy).engine.blake3
    server = start_server(model_copy, MMAAS_EXPECTED_ENGINE=pin)
    assert server.client().is_model_ready("two-outputs")


def test_refuses_an_engine_built_for_another_onnxruntime(
    start_server: StartServer, model_copy: Path
) -> None:
    manifest = read_manifest(model_copy)
    write_manifest(model_copy, replace(manifest, backend={**manifest.backend, "version": "0.0.1"}))
    line = refused(start_server(model_copy, wait=False))
    assert "engine built for ONNX Runtime 0.0.1" in line


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"MMAAS_INSTANCE_COUNT": "two"}, "MMAAS_INSTANCE_COUNT: 'two' is not a whole number"),
        ({"MMAAS_INSTANCE_COUNT": "100"}, "MMAAS_INSTANCE_COUNT: 100 is out of range"),
        ({"MMAAS_GRPC_PORT": "70000"}, "MMAAS_GRPC_PORT: 70000 is out of range; write a TCP port"),
        ({"MMAAS_DYNAMIC_BATCHING": "yes"}, "MMAAS_DYNAMIC_BATCHING: 'yes' is not a boolean"),
        ({"MMAAS_TLS_CERT": "/nonexistent.pem"}, "MMAAS_TLS_CERT: '/nonexistent.pem': no such"),
    ],
)
def test_bad_settings_name_the_variable(
    start_server: StartServer, model_copy: Path, env: dict[str, str], fragment: str
) -> None:
    assert fragment in refused(start_server(model_copy, wait=False, **env))


def test_refuses_a_busy_port(start_server: StartServer, model_copy: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        line = refused(start_server(model_copy, wait=False, MMAAS_GRPC_PORT=port))
    assert f"cannot listen on 127.0.0.1:{port} (MMAAS_GRPC_PORT)" in line


LAYERING_PROBE = """
import importlib.abc, sys
BLOCKED = {"pydantic", "jinja2", "yaml", "docker", "click", "rich", "onnx", "filelock"}
ALLOWED = {"mmaas", "mmaas.backends", "mmaas.backends.onnxruntime",
           "mmaas.backends.onnxruntime.runtime", "mmaas.backends.targets"}
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in BLOCKED or (top == "mmaas" and name not in ALLOWED
                              and not name.startswith(("mmaas.server", "mmaas.core"))):
            raise ImportError(f"the runtime image has no {name}")
        return None
sys.meta_path.insert(0, Blocker())
import mmaas.server.__main__, mmaas.server.app, mmaas.backends.onnxruntime.runtime
print(",".join(sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)))
"""


def test_server_imports_only_the_foundation_and_its_package() -> None:
    """The runtime image lacks pydantic, Jinja2, PyYAML, docker, click, onnx: importing the
    server (and its back end) with those blocked must work and load none of them."""
    done = subprocess.run(
        [sys.executable, "-c", LAYERING_PROBE], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
