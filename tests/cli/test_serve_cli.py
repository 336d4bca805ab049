"""`mmaas serve`: compile on the host, then serve with the spec's runtime settings."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as triton
import tritonclient.http as triton_http

from docker_fixtures import wait_for_grpc_serving
from mmaas.build.runtime_env import runtime_env
from mmaas.build.spec_checks import host_checks
from mmaas.server.settings import from_env
from mmaas.spec.load import load_spec
from onnx_builder import FLOAT, make_onnx
from server.conftest import free_port, free_ports

MMAAS = str(Path(sys.executable).parent / "mmaas")


def test_serve_compiles_and_takes_the_runtime_section(
    ppocr_models: dict[str, Path], tmp_path: Path
) -> None:
    """The spec's runtime.grpc_port and runtime.http_port are where it listens (as in the
    image), requests are answered like in-process ONNX Runtime, and SIGTERM ends it with
    exit 0."""
    folder = tmp_path / "cls"
    shutil.copytree(
        ppocr_models["ppocr-cls"].parent, folder, ignore=shutil.ignore_patterns(".mmaas")
    )
    port, http_port, metrics_port = free_ports(3)
    with (folder / "model.yaml").open("a") as spec:
        runtime = f"grpc_port: {port}, http_port: {http_port}, metrics_port: {metrics_port}"
        spec.write(f"runtime: {{{runtime}}}\n")
    server = subprocess.Popen(
        [MMAAS, "serve", str(folder), "--host", "127.0.0.1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for_grpc_serving(port, timeout=120)
        assert (folder / ".mmaas" / "engine" / "manifest.json").is_file()
        batch = np.random.default_rng(0).random((2, 3, 48, 192), dtype=np.float32)
        tensor = triton.InferInput("x", list(batch.shape), "FP32")
        tensor.set_data_from_numpy(batch)
        result = triton.InferenceServerClient(f"127.0.0.1:{port}").infer("ppocr-cls", [tensor])
        name = "save_infer_model/scale_0.tmp_1"
        session = ort.InferenceSession(
            str(ppocr_models["ppocr-cls"]), providers=["CPUExecutionProvider"]
        )
        expected = session.run([name], {"x": batch})[0]
        np.testing.assert_allclose(result.as_numpy(name), expected, atol=1e-5)
        over_http = triton_http.InferenceServerClient(f"127.0.0.1:{http_port}")
        rest = triton_http.InferInput("x", list(batch.shape), "FP32")
        rest.set_data_from_numpy(batch)
        np.testing.assert_array_equal(
            over_http.infer("ppocr-cls", [rest]).as_numpy(name), result.as_numpy(name)
        )
    finally:
        server.send_signal(signal.SIGTERM)
        output, _ = server.communicate(timeout=60)
    assert server.returncode == 0, output[-2000:]
    assert "Traceback" not in output


def _outside_address() -> str | None:
    """An IPv4 address of this host other than loopback, or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: nothing is sent
            address = probe.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


def test_serve_binds_loopback_unless_told_and_the_image_keeps_all_addresses(
    tmp_path: Path,
) -> None:
    """`mmaas serve` without --host or MMAAS_HOST listens on 127.0.0.1
    only (a connection to another address of the host is refused); the image's server
    default stays 0.0.0.0 (no MMAAS_HOST in the image's environment)."""
    outside = _outside_address()
    if outside is None:
        pytest.skip("this host has no non-loopback IPv4 address")
    make_onnx(tmp_path / "m" / "model.onnx", [("x", FLOAT, [1, 4])])
    port = free_port()
    (tmp_path / "m" / "model.yaml").write_text(
        'name: loopback\nversion: "1"\nsource: {path: model.onnx}\n'
        f"runtime: {{grpc_port: {port}, metrics_port: 0}}\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "MMAAS_HOST"}
    server = subprocess.Popen(
        [MMAAS, "serve", str(tmp_path / "m")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        wait_for_grpc_serving(port, timeout=120)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((outside, port), timeout=5).close()
    finally:
        server.send_signal(signal.SIGTERM)
        output, _ = server.communicate(timeout=60)
    assert server.returncode == 0, output[-2000:]
    assert from_env({}).host == "0.0.0.0"
    assert "MMAAS_HOST" not in runtime_env(load_spec(tmp_path / "m", checks=host_checks()).spec)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--http-port", "99999", "99999 is out of range; write a TCP port from 1 to 65535"),
        ("--grpc-port", "-1", "-1 is out of range"),
        ("--metrics-port", "70000", "70000 is out of range"),
    ],
)
def test_a_bad_option_value_is_refused_naming_the_option(
    tmp_path: Path, option: str, value: str, message: str
) -> None:
    """The table's rule refuses it under the option the user typed, not its MMAAS_*
    variable, and before anything is compiled."""
    make_onnx(tmp_path / "m" / "model.onnx", [("x", FLOAT, [1, 4])])
    (tmp_path / "m" / "model.yaml").write_text(
        'name: options\nversion: "1"\nsource: {path: model.onnx}\n'
    )
    done = subprocess.run(
        [MMAAS, "serve", str(tmp_path / "m"), option, value],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"Invalid value for '{option}': {message}" in done.stderr
    assert "MMAAS_" not in done.stderr
    assert not (tmp_path / "m" / ".mmaas").exists()
