"""The HTTP port under the server's settings, against the real server (subprocess) with
curl and tritonclient.http: TLS and mutual TLS, requests batched and limited by the
scheduler the gRPC port uses, and the probes during SIGTERM's grace period."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as triton
import tritonclient.http.aio as triton_aio
from tritonclient.utils import InferenceServerException

from tls import make_certificates

from ..conftest import ClientTls
from .helpers import curl, http_input


def test_tls_and_mutual_tls_apply_to_the_http_port(
    start_server, two_outputs_dir: Path, tmp_path: Path
) -> None:
    certs = make_certificates(tmp_path)
    env = {"MMAAS_TLS_CERT": str(certs["server"]), "MMAAS_TLS_KEY": str(certs["server-key"])}
    server = start_server(two_outputs_dir, tls=ClientTls(certs["ca"]), **env)
    url = f"https://{server.http_url}/v2/health/ready"
    assert json.loads(curl("-f", "--cacert", str(certs["ca"]), url).stdout) == {"ready": True}
    assert curl("-f", f"http://{server.http_url}/v2/health/ready").returncode != 0
    mutual = start_server(
        two_outputs_dir,
        tls=ClientTls(certs["ca"], cert=certs["client"], key=certs["client-key"]),
        MMAAS_TLS_CLIENT_CA=str(certs["ca"]),
        **env,
    )
    url = f"https://{mutual.http_url}/v2/health/ready"
    identity = ["--cert", str(certs["client"]), "--key", str(certs["client-key"])]
    assert curl("-f", "--cacert", str(certs["ca"]), *identity, url).returncode == 0
    assert curl("-f", "--cacert", str(certs["ca"]), url).returncode != 0


def test_http_requests_are_batched_and_limited_by_the_same_scheduler(
    start_server, two_outputs_dir: Path
) -> None:
    server = start_server(
        two_outputs_dir,
        MMAAS_DYNAMIC_BATCHING="true",
        MMAAS_MAX_QUEUE_DELAY_US="200000",
        MMAAS_PREFERRED_BATCH_SIZES="8",
    )
    rows = [np.full((1, 4), i, np.float32) for i in range(8)]

    async def burst() -> list[np.ndarray]:
        client = triton_aio.InferenceServerClient(server.http_url)
        try:
            calls = [client.infer("two-outputs", [http_input("x", r, "FP32")]) for r in rows]
            return [result.as_numpy("boxes") for result in await asyncio.gather(*calls)]
        finally:
            await client.close()

    answers = asyncio.run(burst())
    for row, boxes in zip(rows, answers, strict=True):
        np.testing.assert_array_equal(boxes, 2 * row)  # each caller gets its own row back
    stats = triton.InferenceServerClient(server.http_url).get_inference_statistics("two-outputs")
    model = stats["model_stats"][0]
    assert model["inference_count"] == 8 and model["execution_count"] < 8
    assert any(batch["batch_size"] > 1 for batch in model["batch_stats"])


def test_http_probes_during_sigterm(start_server, two_outputs_dir: Path) -> None:
    """SIGTERM: /v2/health/ready turns 503 at once while the port stays open for the grace
    period (live stays 200, a new infer is a 503 KServe error), then the server exits 0."""
    server = start_server(two_outputs_dir, MMAAS_SHUTDOWN_GRACE_S="3")
    base = f"http://{server.http_url}"
    server.process.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    while (
        curl("-s", "-o", "/dev/null", "-w", "%{http_code}", f"{base}/v2/health/ready").stdout
        != "503"
    ):
        assert time.monotonic() - signalled < 2, "ready did not turn 503 at once"
        time.sleep(0.05)
    assert json.loads(curl("-f", f"{base}/v2/health/live").stdout) == {"live": True}
    client = triton.InferenceServerClient(server.http_url)
    with pytest.raises(InferenceServerException) as refused:
        client.infer("two-outputs", [http_input("x", np.ones((1, 4), np.float32), "FP32")])
    assert refused.value.status() == "503" and "shutting down" in refused.value.message()
    assert server.process.wait(30) == 0
    assert time.monotonic() - signalled >= 3  # the port stayed open for the grace period
