"""KServe v2 ModelInfer and metadata RPCs against the real server (subprocess) with the
real client (tritonclient.grpc), plus hand-made protobuf requests for what tritonclient
refuses to send. Reference outputs come from in-process ONNX Runtime on the source model.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import grpc
import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as triton
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from ..conftest import RunningServer


def infer_input(name: str, array: np.ndarray, datatype: str) -> triton.InferInput:
    tensor = triton.InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(array)
    return tensor


def reference(source: Path, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """In-process ONNX Runtime on the original ONNX file (the floor and the truth)."""
    return ort.InferenceSession(str(source), providers=["CPUExecutionProvider"]).run(None, inputs)


def rpc(server: RunningServer, request: object) -> object:
    with grpc.insecure_channel(server.url) as channel:
        return service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request)


def rpc_error(server: RunningServer, request: object) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        rpc(server, request)
    return info.value


def raw_request(model: str, tensors: dict[str, tuple[str, list[int], bytes]]) -> object:
    request = service_pb2.ModelInferRequest(model_name=model)
    for name, (datatype, shape, raw) in tensors.items():
        request.inputs.add(name=name, datatype=datatype, shape=shape)
        request.raw_input_contents.append(raw)
    return request


def expect_error(call: Callable[[], object], status: str, *fragments: str) -> str:
    """Run a tritonclient call that must fail with ``status``; the message must hold
    every fragment (the field's name, what was expected, what was got)."""
    with pytest.raises(InferenceServerException) as info:
        call()
    assert info.value.status() == f"StatusCode.{status}", info.value.message()
    for fragment in fragments:
        assert fragment in info.value.message(), info.value.message()
    return info.value.message()


@pytest.fixture(scope="module")
def det(module_server: Callable[..., RunningServer], det_dir: Path) -> RunningServer:
    return module_server(det_dir)


@pytest.fixture(scope="module")
def cls(module_server: Callable[..., RunningServer], cls_dir: Path) -> RunningServer:
    return module_server(cls_dir)


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


def datatype_inputs(rows: int) -> dict[str, tuple[str, np.ndarray]]:
    rng = np.random.default_rng(3)
    return {
        "a": ("FP16", rng.random((rows, 4)).astype(np.float16)),
        "b": ("INT64", rng.integers(-(2**40), 2**40, (rows, 4), dtype=np.int64)),
        "c": ("INT32", rng.integers(-1000, 1000, (rows, 4), dtype=np.int32)),
        "d": ("BOOL", rng.integers(0, 2, (rows, 4)).astype(bool)),
        "e": ("UINT8", rng.integers(0, 256, (rows, 4), dtype=np.uint8)),
    }


def expected_datatype_outputs(values: dict[str, tuple[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {
        "a_out": values["a"][1] + values["a"][1],
        "b_out": -values["b"][1],
        "c_out": values["c"][1] + values["c"][1],
        "d_out": ~values["d"][1],
        "e_out": values["e"][1],
    }


def test_fp16_int64_int32_bool_uint8_raw(
    module_server: Callable[..., RunningServer], datatypes_dir: Path
) -> None:
    server = module_server(datatypes_dir)
    values = datatype_inputs(3)
    result = server.client().infer(
        "datatypes", [infer_input(n, a, dt) for n, (dt, a) in values.items()]
    )
    for name, want in expected_datatype_outputs(values).items():
        got = result.as_numpy(name)
        assert got.dtype == want.dtype, name
        np.testing.assert_array_equal(got, want)
    datatypes = {o.name: o.datatype for o in result.get_response().outputs}
    assert datatypes == {
        "a_out": "FP16",
        "b_out": "INT64",
        "c_out": "INT32",
        "d_out": "BOOL",
        "e_out": "UINT8",
    }


def test_int64_int32_bool_uint8_typed_contents(
    module_server: Callable[..., RunningServer], integers_dir: Path
) -> None:
    server = module_server(integers_dir)
    values = {n: v for n, v in datatype_inputs(2).items() if n != "a"}
    fields = {
        "b": "int64_contents",
        "c": "int_contents",
        "d": "bool_contents",
        "e": "uint_contents",
    }
    request = service_pb2.ModelInferRequest(model_name="integers")
    for name, (datatype, array) in values.items():
        tensor = request.inputs.add(name=name, datatype=datatype, shape=list(array.shape))
        getattr(tensor.contents, fields[name]).extend(array.reshape(-1).tolist())
    result = triton.InferResult(rpc(server, request))
    want = expected_datatype_outputs({"a": ("FP16", np.zeros(1)), **values})
    for name in ("b_out", "c_out", "d_out", "e_out"):
        assert result.as_numpy(name).dtype == want[name].dtype
        np.testing.assert_array_equal(result.as_numpy(name), want[name])


def test_fp16_has_no_typed_contents(
    module_server: Callable[..., RunningServer], datatypes_dir: Path
) -> None:
    server = module_server(datatypes_dir)
    request = service_pb2.ModelInferRequest(model_name="datatypes")
    for name, (datatype, array) in datatype_inputs(1).items():
        tensor = request.inputs.add(name=name, datatype=datatype, shape=list(array.shape))
        tensor.contents.fp32_contents.extend(array.reshape(-1).astype(np.float32).tolist())
    error = rpc_error(server, request)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "input 'a': FP16 has no typed contents field" in error.details()


def test_bytes_raw_with_empty_element_round_trips(
    module_server: Callable[..., RunningServer], strings_dir: Path
) -> None:
    server = module_server(strings_dir)
    text = np.array([b"hello", b"", "wörld".encode()], dtype=object)
    result = server.client().infer("strings", [infer_input("text", text, "BYTES")])
    assert result.get_response().outputs[0].datatype == "BYTES"
    assert result.as_numpy("same").tolist() == text.tolist()


def test_bytes_typed_contents(
    module_server: Callable[..., RunningServer], strings_dir: Path
) -> None:
    server = module_server(strings_dir)
    request = service_pb2.ModelInferRequest(model_name="strings")
    request.inputs.add(name="text", datatype="BYTES", shape=[2]).contents.bytes_contents.extend(
        [b"a", b""]
    )
    assert triton.InferResult(rpc(server, request)).as_numpy("same").tolist() == [b"a", b""]


def test_bytes_prefix_claiming_more_than_follows(
    module_server: Callable[..., RunningServer], strings_dir: Path
) -> None:
    server = module_server(strings_dir)
    raw = struct.pack("<I", 2) + b"ok" + struct.pack("<I", 1000) + b"short"
    error = rpc_error(server, raw_request("strings", {"text": ("BYTES", [2], raw)}))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "BYTES element 1 claims 1000 bytes but only 5 follow" in error.details()


def test_bytes_that_are_not_utf8_for_a_string_engine_are_invalid_argument(
    module_server: Callable[..., RunningServer], strings_dir: Path
) -> None:
    server = module_server(strings_dir)
    request = service_pb2.ModelInferRequest(model_name="strings")
    request.inputs.add(name="text", datatype="BYTES", shape=[1]).contents.bytes_contents.extend(
        [b"\x00\xff"]
    )
    error = rpc_error(server, request)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "input 'text': a BYTES element is not UTF-8 text" in error.details()


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


def test_unknown_model_and_version_are_not_found(det: RunningServer) -> None:
    x = infer_input("x", np.zeros((1, 3, 32, 32), np.float32), "FP32")
    client = det.client()
    expect_error(
        lambda: client.infer("nope", [x]), "NOT_FOUND", "unknown model 'nope'", "'ppocr-det'"
    )
    expect_error(
        lambda: client.infer("ppocr-det", [x], model_version="9"),
        "NOT_FOUND",
        "no version '9' (model_version)",
        "'1.0.0'",
    )
    expect_error(lambda: client.is_model_ready("nope"), "NOT_FOUND", "unknown model")
    expect_error(lambda: client.get_model_metadata("ppocr-det", "2"), "NOT_FOUND", "version")


@pytest.mark.parametrize(
    ("tensors", "fragments"),
    [
        (
            {"y": ("FP32", [1, 3, 32, 32])},
            ["unknown input 'y' in inputs", "'x' (FP32 [-1, 3, -1, -1])"],
        ),
        ({"x": ("FP32", [1, 3, 32, 32]), "extra": ("FP32", [1])}, ["unknown input 'extra'"]),
        ({"x": ("FP16", [1, 3, 32, 32])}, ["input 'x': datatype FP16, expected FP32"]),
        ({"x": ("FP32", [3, 32, 32])}, ["has rank 3, expected rank 4"]),
        (
            {"x": ("FP32", [1, 3, 2048, 32])},
            ["outside the optimization profile", "axis 2 is 2048", "allowed 32..1280"],
        ),
        ({"x": ("FP32", [5, 3, 32, 32])}, ["axis 0 is 5, allowed 1..4"]),
        ({"x": ("FP32", [1, 4, 32, 32])}, ["axis 1 is 4, allowed 3"]),
        ({"x": ("FP32", [1, 3, 16, 32])}, ["axis 2 is 16, allowed 32..1280"]),
    ],
)
def test_malformed_inputs_are_invalid_argument(
    det: RunningServer, tensors: dict, fragments: list[str]
) -> None:
    request = raw_request(
        "ppocr-det",
        {
            name: (datatype, shape, np.zeros(shape, np.float32).tobytes())
            for name, (datatype, shape) in tensors.items()
        },
    )
    error = rpc_error(det, request)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
    for fragment in fragments:
        assert fragment in error.details()


def test_fp64_data_labelled_fp32_is_answered_with_byte_counts(det: RunningServer) -> None:
    data = np.zeros((1, 3, 32, 32), np.float64).tobytes()
    error = rpc_error(det, raw_request("ppocr-det", {"x": ("FP32", [1, 3, 32, 32], data)}))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == (
        "input 'x': the data holds 24576 bytes, but shape "
        "[1, 3, 32, 32] of FP32 (4 bytes each) needs 12288"
    )


def test_missing_input_and_unpaired_raw_contents(
    module_server: Callable[..., RunningServer], datatypes_dir: Path, det: RunningServer
) -> None:
    server = module_server(datatypes_dir)
    request = raw_request("datatypes", {"a": ("FP16", [1, 4], b"\0" * 8)})
    assert "missing input 'b', 'c', 'd', 'e' in inputs" in rpc_error(server, request).details()
    request = raw_request("ppocr-det", {"x": ("FP32", [1, 3, 32, 32], b"\0" * 12288)})
    request.raw_input_contents.append(b"")
    error = rpc_error(det, request)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "raw_input_contents has 2 entries for 1 inputs" in error.details()


def test_typed_count_mismatch_and_unsupported_parameters(cls: RunningServer) -> None:
    request = service_pb2.ModelInferRequest(model_name="ppocr-cls")
    request.inputs.add(
        name="x", datatype="FP32", shape=[1, 3, 48, 192]
    ).contents.fp32_contents.extend([0.0] * 10)
    assert "input 'x': the data holds 10 values, but shape [1, 3, 48, 192] needs 27648" in (
        rpc_error(cls, request).details()
    )
    request.inputs[0].contents.fp32_contents.extend([0.0] * (3 * 48 * 192 - 10))
    request.outputs.add(name="save_infer_model/scale_0.tmp_1").parameters[
        "classification"
    ].int64_param = 2
    error = rpc_error(cls, request)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "parameter 'classification'" in error.details()


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
