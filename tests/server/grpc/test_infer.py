"""KServe v2 ModelInfer against the real server (subprocess) with the real client
(tritonclient.grpc) and hand-made protobuf requests: answers equal in-process ONNX Runtime
on the source model (raw and typed FP32 contents), requested outputs (all, a subset,
unknown: C18), and messages over 4 MiB under the limit derived from the max shapes, the
setting named when over it (C16)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as triton
from tritonclient.grpc import service_pb2

from ..conftest import RunningServer
from .helpers import expect_error, infer_input, reference, rpc


@pytest.mark.parametrize("shape", [(1, 3, 320, 320), (2, 3, 480, 640)])
def test_det_outputs_equal_onnxruntime(
    det: RunningServer, ppocr_models: dict[str, Path], shape: tuple[int, ...]
) -> None:
    image = np.random.default_rng(1).random(shape, dtype=np.float32)
    result = det.client().infer("ppocr-det", [infer_input("x", image, "FP32")], request_id="r1")
    got = result.as_numpy("sigmoid_0.tmp_0")
    (want,) = reference(ppocr_models["ppocr-det"], {"x": image})
    assert got.dtype == np.float32 and got.shape == (shape[0], 1, *shape[2:])
    np.testing.assert_allclose(got, want, atol=1e-4)
    assert result.get_response().id == "r1"
    assert result.get_response().model_version == "1"


def test_typed_fp32_contents_equal_raw(cls: RunningServer, ppocr_models: dict[str, Path]) -> None:
    batch = np.random.default_rng(2).random((3, 3, 48, 192), dtype=np.float32)
    request = service_pb2.ModelInferRequest(model_name="ppocr-cls")
    tensor = request.inputs.add(name="x", datatype="FP32", shape=list(batch.shape))
    tensor.contents.fp32_contents.extend(batch.reshape(-1).tolist())
    response = rpc(cls, request)
    got = triton.InferResult(response).as_numpy("save_infer_model/scale_0.tmp_1")
    (want,) = reference(ppocr_models["ppocr-cls"], {"x": batch})
    assert response.outputs[0].datatype == "FP32" and list(response.outputs[0].shape) == [3, 2]
    assert len(response.raw_output_contents) == 1  # outputs always travel raw
    np.testing.assert_allclose(got, want, atol=1e-4)


def test_requested_outputs_all_subset_and_unknown(
    module_server: Callable[..., RunningServer], two_outputs_dir: Path
) -> None:
    client = module_server(two_outputs_dir).client()
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    inputs = [infer_input("x", x, "FP32")]
    everything = client.infer("two-outputs", inputs)
    assert [o.name for o in everything.get_response().outputs] == ["boxes", "scores"]
    np.testing.assert_array_equal(everything.as_numpy("boxes"), 2 * x)
    only = client.infer("two-outputs", inputs, outputs=[triton.InferRequestedOutput("scores")])
    assert [o.name for o in only.get_response().outputs] == ["scores"]
    np.testing.assert_array_equal(only.as_numpy("scores"), x.sum(axis=1, keepdims=True))
    expect_error(
        lambda: client.infer(
            "two-outputs", inputs, outputs=[triton.InferRequestedOutput("logits")]
        ),
        "INVALID_ARGUMENT",
        "unknown output 'logits' in outputs",
        "'boxes'",
        "'scores'",
    )


def test_messages_over_4_mib_pass_under_the_derived_limit(
    module_server: Callable[..., RunningServer], large_dir: Path
) -> None:
    server = module_server(large_dir)
    batch = np.random.default_rng(4).random((8, 3, 640, 640), dtype=np.float32)  # 39 MB
    result = server.client().infer("large", [infer_input("x", batch, "FP32")])
    np.testing.assert_array_equal(result.as_numpy("y"), -batch)


def test_over_limit_names_the_setting(
    module_server: Callable[..., RunningServer], large_dir: Path
) -> None:
    server = module_server(large_dir, MMAAS_MAX_MESSAGE_SIZE=str(4 * 1024 * 1024))
    batch = np.zeros((8, 3, 640, 640), dtype=np.float32)
    expect_error(
        lambda: server.client().infer("large", [infer_input("x", batch, "FP32")]),
        "RESOURCE_EXHAUSTED",
        "MMAAS_MAX_MESSAGE_SIZE",
        "4194304 bytes",
    )
