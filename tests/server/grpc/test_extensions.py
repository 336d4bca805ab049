"""The rest of the Triton protocol over gRPC against the real server (subprocess):
Triton's version policy, the model repository extension (index, unload, load), log and
trace settings, server metadata, reflection v1 and v1alpha (grpcurl too), keepalive.
Clients: tritonclient.grpc, grpcurl, and hand-made messages where tritonclient has none."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import numpy as np
import pytest
import tritonclient.grpc as triton
from grpc_reflection.v1alpha import reflection_pb2
from tritonclient.grpc import service_pb2, service_pb2_grpc

from ..conftest import RunningServer
from .helpers import expect_error, infer_input

GRPCURL = Path(sys.executable).parent / "grpcurl"


def x(batch: int = 1) -> triton.InferInput:
    return infer_input("x", np.zeros((batch, 3, 48, 192), np.float32), "FP32")


def test_version_policy_answers_1_the_spec_version_and_empty(cls: RunningServer) -> None:
    client = cls.client()
    for version in ("", "1", "1.0.0"):
        result = client.infer("ppocr-cls", [x()], model_version=version)
        assert result.get_response().model_version == "1"
        assert client.is_model_ready("ppocr-cls", version)
    assert list(client.get_model_metadata("ppocr-cls").versions) == ["1"]  # as Triton
    stats = client.get_inference_statistics("ppocr-cls", "1").model_stats[0]
    assert stats.version == "1" and stats.inference_stats.success.count > 0
    config = client.get_model_config("ppocr-cls").config
    assert list(config.version_policy.specific.versions) == [1]
    assert config.model_transaction_policy.decoupled is False
    expect_error(
        lambda: client.infer("ppocr-cls", [x()], model_version="2"),
        "NOT_FOUND",
        "has no version '2' (model_version); it serves version '1', '1.0.0'",
    )


def test_another_version_number_by_setting(
    start_server: Callable[..., RunningServer], cls_dir: Path
) -> None:
    server = start_server(cls_dir, MMAAS_MODEL_VERSION="3")
    client = server.client()
    assert client.infer("ppocr-cls", [x()], model_version="3").get_response().model_version == "3"
    assert list(client.get_model_metadata("ppocr-cls").versions) == ["3"]
    expect_error(lambda: client.is_model_ready("ppocr-cls", "1"), "NOT_FOUND", "'3', '1.0.0'")
    assert 'nv_inference_count{model="ppocr-cls",version="3"}' in server.metrics()


def test_server_metadata_lists_the_extensions_it_honours(cls: RunningServer) -> None:
    assert list(cls.client().get_server_metadata().extensions) == [
        "model_repository",
        "model_configuration",
        "system_shared_memory",
        "binary_tensor_data",
        "statistics",
        "logging",
        "generate",
    ]


def test_repository_index_unload_and_load(
    start_server: Callable[..., RunningServer], cls_dir: Path
) -> None:
    server = start_server(cls_dir)
    client = server.client()
    (entry,) = client.get_model_repository_index().models
    assert (entry.name, entry.version, entry.state, entry.reason) == ("ppocr-cls", "1", "READY", "")
    client.unload_model("ppocr-cls")
    (entry,) = client.get_model_repository_index().models
    assert (entry.state, entry.reason) == ("UNAVAILABLE", "unloaded")
    with server.channel() as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        assert not stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(ready=True)).models
    assert not client.is_model_ready("ppocr-cls") and not client.is_server_ready()
    assert server.health() == "NOT_SERVING"
    expect_error(lambda: client.infer("ppocr-cls", [x()]), "UNAVAILABLE", "not ready")
    client.load_model("ppocr-cls")
    assert client.is_model_ready("ppocr-cls") and server.health() == "SERVING"
    assert client.infer("ppocr-cls", [x(2)]).as_numpy("save_infer_model/scale_0.tmp_1").shape == (
        2,
        2,
    )
    assert server.stderr().count("warm-up runs") == 2  # loaded again: verified and warmed up


def test_repository_refusals_say_why(cls: RunningServer) -> None:
    client = cls.client()
    expect_error(lambda: client.load_model("nope"), "NOT_FOUND", "unknown model 'nope'")
    expect_error(
        lambda: client.load_model("ppocr-cls", config='{"max_batch_size": 8}'),
        "UNIMPLEMENTED",
        "load parameter 'config' is not supported",
        "rebuild the image",
    )
    expect_error(
        lambda: client.load_model("ppocr-cls", files={"file:1/model.onnx": b"x"}),
        "UNIMPLEMENTED",
        "load parameter 'file:1/model.onnx'",
    )
    with grpc.insecure_channel(cls.url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        with pytest.raises(grpc.RpcError) as error:
            stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(repository_name="other"))
    assert error.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert "'repository_name' specification is not supported" in error.value.details()


def test_log_settings_are_honoured_and_log_file_refused(cls: RunningServer) -> None:
    client = cls.client()
    settings = client.get_log_settings(as_json=True)["settings"]
    assert {k: next(iter(v.values())) for k, v in settings.items()} == {
        "log_file": "",
        "log_info": True,
        "log_warning": True,
        "log_error": True,
        "log_verbose_level": 0,
        "log_format": "text",
    }
    updated = client.update_log_settings({"log_verbose_level": 1, "log_format": "json"})
    assert updated.settings["log_verbose_level"].uint32_param == 1
    client.infer("ppocr-cls", [x()], request_id="logged-1")
    lines = [line for line in cls.stderr().splitlines() if "logged-1" in line]
    assert lines and json.loads(lines[-1])["message"] == "request served"
    client.update_log_settings({"log_verbose_level": 0, "log_format": "default"})
    client.infer("ppocr-cls", [x()], request_id="not-logged")
    assert "not-logged" not in cls.stderr()
    expect_error(
        lambda: client.update_log_settings({"log_file": "/tmp/triton.log"}),
        "UNIMPLEMENTED",
        "'log_file' = '/tmp/triton.log' is not supported: mmaas logs to stderr",
    )
    expect_error(
        lambda: client.update_log_settings({"log_infos": True}),
        "INVALID_ARGUMENT",
        "unknown log setting 'log_infos'",
    )


def test_trace_settings_answer_off_and_refuse_tracing_by_name(cls: RunningServer) -> None:
    client = cls.client()
    settings = client.get_trace_settings("ppocr-cls").settings
    assert list(settings["trace_level"].value) == ["OFF"]
    expect_error(
        lambda: client.update_trace_settings("ppocr-cls", {"trace_level": ["TIMESTAMPS"]}),
        "UNIMPLEMENTED",
        "trace setting 'trace_level' = ['TIMESTAMPS'] is not supported",
    )


def _reflect(channel: grpc.Channel, version: str, request: object) -> object:
    call = channel.stream_stream(
        f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )
    return next(iter(call(iter([request]), timeout=10)))


def test_reflection_v1_and_v1alpha_list_and_describe(cls: RunningServer) -> None:
    listing = reflection_pb2.ServerReflectionRequest(list_services="")
    symbol = reflection_pb2.ServerReflectionRequest(
        file_containing_symbol="grpc.reflection.v1.ServerReflection"
    )
    with grpc.insecure_channel(cls.url) as channel:
        for version in ("v1", "v1alpha"):
            names = {
                s.name for s in _reflect(channel, version, listing).list_services_response.service
            }  # type: ignore[attr-defined]
            assert {
                "inference.GRPCInferenceService",
                "grpc.health.v1.Health",
                "grpc.reflection.v1.ServerReflection",
                "grpc.reflection.v1alpha.ServerReflection",
            } <= names
        files = _reflect(channel, "v1", symbol).file_descriptor_response.file_descriptor_proto  # type: ignore[attr-defined]
    assert any(b"grpc.reflection.v1" in f and b"v1alpha" not in f for f in files)
    done = subprocess.run(
        [str(GRPCURL), "-plaintext", cls.url, "describe", "inference.GRPCInferenceService"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "rpc ModelStreamInfer ( stream .inference.ModelInferRequest )" in done.stdout


def _idle_stream(url: str, ping_ms: int, idle_s: float) -> grpc.StatusCode | None:
    """Open ModelStreamInfer, ping every ``ping_ms`` while idle ``idle_s``, then send one
    request; None when it is answered, else the status the stream ended with."""
    options = [
        ("grpc.keepalive_time_ms", ping_ms),
        ("grpc.keepalive_timeout_ms", 5000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
    ]
    with grpc.insecure_channel(url, options=options) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)

        def requests():
            time.sleep(idle_s)
            yield service_pb2.ModelInferRequest(model_name="ppocr-cls", id="after-idle")

        try:
            responses = list(stub.ModelStreamInfer(requests(), timeout=idle_s + 20))
        except grpc.RpcError as error:
            return error.code()
    assert responses[0].infer_response.id == "after-idle"
    return None


@pytest.mark.slow
def test_keepalive_pings_are_accepted_down_to_the_configured_interval(
    start_server: Callable[..., RunningServer], cls_dir: Path
) -> None:
    """gRPC's own server default (5 minutes) answers a client pinging every few seconds
    with GOAWAY too_many_pings; the setting moves the limit (the default, 5 s, accepts a
    client pinging every 10 s). gRPC's client sends at most about one ping a second."""
    server = start_server(cls_dir, MMAAS_GRPC_HTTP2_MIN_PING_INTERVAL_WITHOUT_DATA_MS="2000")
    assert _idle_stream(server.url, ping_ms=2500, idle_s=6) is None
    assert _idle_stream(server.url, ping_ms=1000, idle_s=6) == grpc.StatusCode.UNAVAILABLE
    assert "too_many_pings" not in server.stderr()
