"""SIGTERM with a grace period, watched by probes (gRPC health, ServerReady, the image's
HEALTHCHECK command ``python -m mmaas.server.probe``): NOT_SERVING at once, the port still
open and answering (new requests UNAVAILABLE, the in-flight one answered), exit 0 after
the grace period; a second signal ends the wait; the probe's exit codes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from .conftest import RunningServer
from .test_batching import infer
from .test_operations import wait_received

StartServer = Callable[..., RunningServer]


def probe(server: RunningServer) -> subprocess.CompletedProcess[str]:
    """The image's HEALTHCHECK command against ``server``."""
    env = {**os.environ, "MMAAS_GRPC_PORT": str(server.port)}
    return subprocess.run(
        [sys.executable, "-m", "mmaas.server.probe"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_sigterm_reports_not_serving_at_once_keeps_the_port_then_exits_0(
    start_server: StartServer, det_dir: Path
) -> None:
    server = start_server(det_dir, MMAAS_SHUTDOWN_GRACE_S="4")
    ok = probe(server)
    assert ok.returncode == 0 and "SERVING" in ok.stderr
    image = np.random.default_rng(0).random((4, 3, 960, 960), dtype=np.float32)
    with ThreadPoolExecutor(1) as pool:
        in_flight = pool.submit(infer, server, "ppocr-det", image)
        wait_received(server, 1)
        signalled = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        deadline = signalled + 2
        while server.health(timeout=0.5) != "NOT_SERVING":
            assert time.monotonic() < deadline, "health did not turn NOT_SERVING at once"
            time.sleep(0.05)
        client = server.client()
        assert client.is_server_live() and not client.is_server_ready()
        with pytest.raises(InferenceServerException) as refused:
            infer(server, "ppocr-det", np.zeros((1, 3, 64, 64), np.float32))
        assert refused.value.status() == "StatusCode.UNAVAILABLE"
        assert "shutting down (SIGTERM)" in refused.value.message()
        down = probe(server)
        assert down.returncode == 1 and "NOT_SERVING" in down.stderr
        assert in_flight.result(timeout=60).shape == (4, 1, 960, 960)
    assert server.process.wait(30) == 0, server.stderr()
    assert time.monotonic() - signalled >= 4
    assert "SIGTERM: draining: NOT_SERVING; ports open 4.0 s more" in server.stderr()
    assert "grace period over: closing the ports" in server.stderr()


def test_a_second_signal_ends_the_wait(start_server: StartServer, two_outputs_dir: Path) -> None:
    server = start_server(two_outputs_dir, MMAAS_SHUTDOWN_GRACE_S="60")
    server.process.send_signal(signal.SIGTERM)
    while server.health(timeout=0.5) != "NOT_SERVING":
        time.sleep(0.05)
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(20) == 0
    assert "grace period over" not in server.stderr()


def test_the_probe_fails_when_nothing_answers(tmp_path: Path) -> None:
    from .conftest import free_port

    env = {**os.environ, "MMAAS_GRPC_PORT": str(free_port())}
    done = subprocess.run(
        [sys.executable, "-m", "mmaas.server.probe"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 1 and "no health answer" in done.stderr
