"""The exported config.pbtxt parsed back with Triton's own ``model_config.proto`` (the
stubs shipped in tritonclient, not mmaas's) and checked field by field against the spec
and the manifest."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as triton

from export_models import PINNED, model_copy, source_of
from mmaas.export.triton import model_config

SETTINGS = {
    "runtime": {
        "instance_count": 3,
        "dynamic_batching": {
            "preferred_batch_size": [2, 4],
            "max_queue_delay_microseconds": 250,
            "max_queue_size": 64,
        },
    },
    "build": {"onnxruntime": {"graph_optimization_level": "extended"}},
}


@pytest.fixture
def parsed(tmp_path: Path, ppocr_models: dict[str, Path]):
    source = source_of(model_copy(tmp_path, ppocr_models["ppocr-det"], SETTINGS))
    text = text_format.MessageToString(model_config(source))
    return source, text_format.Parse(text, triton.ModelConfig())


def test_config_fields_follow_the_spec(parsed) -> None:
    source, config = parsed
    spec = source.spec
    assert config.name == "ppocr-det"
    assert config.platform == "onnxruntime_onnx" and config.backend == "onnxruntime"
    assert config.default_model_filename == "model.onnx"
    assert config.max_batch_size == spec.max_batch_size == 4
    (tensor,) = config.input
    assert tensor.name == "x" and tensor.data_type == triton.TYPE_FP32
    assert list(tensor.dims) == [3, -1, -1]  # the batch axis left out, -1 dynamic
    (output,) = config.output
    assert output.name == "sigmoid_0.tmp_0" and list(output.dims) == [1, -1, -1]
    (group,) = config.instance_group
    assert group.count == 3 and group.kind == triton.ModelInstanceGroup.KIND_CPU
    batching = config.dynamic_batching
    assert list(batching.preferred_batch_size) == [2, 4]
    assert batching.max_queue_delay_microseconds == 250
    assert batching.default_queue_policy.max_queue_size == 64
    assert config.optimization.graph.level == 1  # Triton's onnxruntime: 1 = extended
    assert list(config.version_policy.specific.versions) == [1]


def test_config_carries_the_engine_identity(parsed) -> None:
    source, config = parsed
    parameters = {key: value.string_value for key, value in config.parameters.items()}
    assert parameters["mmaas.engine.blake3"] == source.manifest.engine.blake3
    assert parameters["mmaas.engine.sha256"] == source.manifest.engine.sha256
    assert parameters["mmaas.manifest.digest"] == source.model_manifest.manifest_digest
    assert parameters["mmaas.backend.version"] == "1.32.0"
    assert parameters["mmaas.image"] == PINNED


def test_a_model_without_batching_keeps_full_shapes(tmp_path: Path, ppocr_models) -> None:
    settings = {"max_batch_size": 0}
    folder = model_copy(tmp_path, ppocr_models["ppocr-det"], settings)
    spec_text = (
        (folder / "model.yaml").read_text().replace("[4, 3, 1280, 1280]", "[1, 3, 1280, 1280]")
    )
    (folder / "model.yaml").write_text(spec_text)
    config = model_config(source_of(folder))
    assert config.max_batch_size == 0
    assert list(config.input[0].dims) == [-1, 3, -1, -1]
    assert not config.HasField("dynamic_batching")
