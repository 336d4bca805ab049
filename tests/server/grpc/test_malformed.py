"""Malformed ModelInfer requests against the real server (subprocess), tritonclient.grpc and
hand-made protobuf: an unknown model or version is NOT_FOUND; unknown, missing or extra
inputs, wrong datatypes, ranks and shapes outside the optimization profile, data of the
wrong byte or value count, unpaired raw contents and unsupported parameters are
INVALID_ARGUMENT, each message naming the field, what was expected and what was got."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import grpc
import numpy as np
import pytest
from tritonclient.grpc import service_pb2

from ..conftest import RunningServer
from .helpers import expect_error, infer_input, raw_request, rpc_error


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
