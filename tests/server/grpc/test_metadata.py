"""The metadata RPCs against the real server (subprocess) with tritonclient.grpc: liveness
and readiness, server and model metadata, the model config, inference statistics counted
by ModelInfer, and the services listed by reflection."""

from __future__ import annotations

import grpc
import numpy as np

from ..conftest import RunningServer
from .helpers import infer_input


def test_metadata_config_statistics_and_server_rpcs(cls: RunningServer) -> None:
    client = cls.client()
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("ppocr-cls") and client.is_model_ready("ppocr-cls", "1.0.0")
    server = client.get_server_metadata()
    assert server.name == "mmaas" and "statistics" in server.extensions
    meta = client.get_model_metadata("ppocr-cls")
    assert [(t.name, t.datatype, list(t.shape)) for t in meta.outputs] == [
        ("save_infer_model/scale_0.tmp_1", "FP32", [-1, 2])
    ]
    config = client.get_model_config("ppocr-cls").config
    assert config.max_batch_size == 32 and list(config.input[0].dims) == [3, 48, 192]
    assert config.platform == "onnxruntime_onnx" and config.instance_group[0].count == 1
    before = client.get_inference_statistics("ppocr-cls").model_stats[0].inference_count
    client.infer("ppocr-cls", [infer_input("x", np.zeros((2, 3, 48, 192), np.float32), "FP32")])
    stats = client.get_inference_statistics("ppocr-cls").model_stats[0]
    assert stats.inference_count == before + 2 and stats.inference_stats.success.count >= 1


def test_reflection_lists_the_services(det: RunningServer) -> None:
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
        ProtoReflectionDescriptorDatabase,
    )

    with grpc.insecure_channel(det.url) as channel:
        services = set(ProtoReflectionDescriptorDatabase(channel).get_services())
    assert {"inference.GRPCInferenceService", "grpc.health.v1.Health"} <= services
