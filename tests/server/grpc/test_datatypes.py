"""Every tensor datatype through ModelInfer against the real server (subprocess): FP16,
INT64, INT32, BOOL and UINT8 as raw contents and as typed contents (FP16 has none), and
BYTES (C15: empty elements, typed contents, a length prefix claiming more than follows,
text that is not UTF-8 for a string engine); the engine's I/O datatypes are answered (C17)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import grpc
import numpy as np
import tritonclient.grpc as triton
from tritonclient.grpc import service_pb2

from ..conftest import RunningServer
from .helpers import infer_input, raw_request, rpc, rpc_error


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
