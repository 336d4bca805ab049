"""The real server answers the probes' questions as the exports ask them
(:mod:`mmaas.core.endpoints`): live (gRPC health service ``liveness``, HTTP
``/v2/health/live``) stays up while a model is unloaded; ready (service ``""``,
``/v2/health/ready``) does not."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from mmaas.core.endpoints import LIVE_PATH, LIVENESS_SERVICE, READY_PATH

from .conftest import RunningServer


def grpc_health(server: RunningServer, service: str) -> str:
    with server.channel() as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=service), timeout=5
        )
    return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)


def http_status(server: RunningServer, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}{path}", timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_an_unloaded_model_is_unready_but_the_server_stays_live(
    start_server: Callable[..., RunningServer], cls_dir: Path
) -> None:
    server = start_server(cls_dir)
    assert grpc_health(server, "") == grpc_health(server, LIVENESS_SERVICE) == "SERVING"
    assert http_status(server, READY_PATH) == http_status(server, LIVE_PATH) == 200
    server.client().unload_model("ppocr-cls")
    assert grpc_health(server, "") == "NOT_SERVING"
    assert grpc_health(server, LIVENESS_SERVICE) == "SERVING"
    assert http_status(server, READY_PATH) != 200
    assert http_status(server, LIVE_PATH) == 200


def test_an_unknown_health_service_is_not_found(
    start_server: Callable[..., RunningServer], cls_dir: Path
) -> None:
    server = start_server(cls_dir)
    try:
        grpc_health(server, "no-such-service")
    except grpc.RpcError as exc:
        assert exc.code() == grpc.StatusCode.NOT_FOUND
    else:
        raise AssertionError("an unknown health service answered")
