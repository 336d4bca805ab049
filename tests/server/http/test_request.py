"""The HTTP body <-> the protocol layer's types without a server
(:mod:`mmaas.server.http.request`, :mod:`mmaas.server.http.response`): the JSON header and
the binary tensor data extension (C24), JSON members of the wrong type (C23), each input's
one data source, and the response (binary outputs with their header length, BYTES as
4-byte length + bytes, JSON numbers that round-trip exactly). The tensors' data are the
shared codec's (tests/server/protocol/test_codec.py)."""

from __future__ import annotations

import struct

import numpy as np
import orjson
import pytest

from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.server.http.binary_header import header_length
from mmaas.server.http.request import parse_body, raw_body
from mmaas.server.http.response import encode_response
from mmaas.server.protocol.codec import from_raw
from mmaas.server.protocol.types import InferRequest, InferResponse, OutputTensor, RawBytes
from mmaas.server.status import InvalidArgument


def binary_body(header: dict, *blobs: bytes) -> tuple[bytes, int]:
    head = orjson.dumps(header)
    return head + b"".join(blobs), len(head)


def refused(call, *args) -> str:
    with pytest.raises(InvalidArgument) as info:
        call(*args)
    return info.value.message


def raw_of(request: InferRequest, index: int) -> bytes:
    data = request.inputs[index].data
    assert isinstance(data, RawBytes)
    return bytes(data.data)


def test_mixed_json_and_binary_inputs_take_the_binary_part_in_input_order() -> None:
    a = np.arange(4, dtype=np.float32)
    c = np.array([7, -8], dtype=np.int64)
    header = {
        "inputs": [
            {"name": "a", "datatype": "FP32", "shape": [4], "parameters": {"binary_data_size": 16}},
            {"name": "b", "datatype": "INT32", "shape": [2], "data": [1, 2]},
            {
                "name": "c",
                "datatype": "INT64",
                "shape": [2],
                "parameters": {"binary_data_size": 16},
            },
        ]
    }
    body, length = binary_body(header, a.tobytes(), c.tobytes())
    request = parse_body(body, length)
    assert raw_of(request, 0) == a.tobytes() and raw_of(request, 2) == c.tobytes()
    assert request.inputs[1].data.values == [1, 2]  # type: ignore[union-attr]
    assert request.headers == [("a", "FP32", (4,)), ("b", "INT32", (2,)), ("c", "INT64", (2,))]
    assert request.size == len(body)


@pytest.mark.parametrize(
    ("sizes", "blob", "message"),
    [
        ((16, 16), b"\0" * 24, "binary_data_size is 16 bytes, but only 8 bytes"),
        ((16, 16), b"\0" * 33, "unexpected additional input data: 1 bytes"),
        ((16, -1), b"\0" * 16, "binary_data_size must be a non-negative integer, got -1"),
    ],
)
def test_binary_sizes_that_disagree_with_the_bytes(sizes, blob, message) -> None:
    header = {
        "inputs": [
            {"name": n, "datatype": "FP32", "shape": [4], "parameters": {"binary_data_size": s}}
            for n, s in zip("ab", sizes, strict=True)
        ]
    }
    assert message in refused(parse_body, *binary_body(header, blob))


def test_a_binary_size_not_the_shapes_is_the_codecs_message() -> None:
    header = {
        "inputs": [
            {"name": "a", "datatype": "FP32", "shape": [4], "parameters": {"binary_data_size": 8}}
        ]
    }
    request = parse_body(*binary_body(header, b"\0" * 8))
    assert refused(from_raw, request.inputs[0], raw_of(request, 0)) == (
        "input 'a': the data holds 8 bytes, but shape [4] of FP32 (4 bytes each) needs 16"
    )


def test_binary_input_without_the_header_length_is_refused() -> None:
    item = {"name": "a", "datatype": "FP32", "shape": [1], "parameters": {"binary_data_size": 4}}
    body = orjson.dumps({"inputs": [item]})
    assert "no Inference-Header-Content-Length header" in refused(parse_body, body, None)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("abc", "Unable to parse Inference-Header-Content-Length, got: 'abc' (body 10 bytes)"),
        ("-1", "Unable to parse Inference-Header-Content-Length, got: '-1' (body 10 bytes)"),
        ("1_0", "Unable to parse Inference-Header-Content-Length, got: '1_0' (body 10 bytes)"),
        ("4, 6", "Unable to parse Inference-Header-Content-Length, got: '4, 6' (body 10"),
        ("11", "Inference-Header-Content-Length is 11, but the body holds 10 bytes"),
    ],
)
def test_header_length_outside_the_body(value: str, message: str) -> None:
    assert message in refused(header_length, [value], 10)


def test_header_length_is_sent_once() -> None:
    message = refused(header_length, ["4", "4"], 10)
    assert "Inference-Header-Content-Length is sent 2 times ('4', '4') for a body of 10" in message
    assert header_length([], 10) is None and header_length([" 4 "], 10) == 4


def test_raw_binary_request_is_the_one_input_at_batch_1() -> None:
    info = ModelInfo(
        name="m",
        version="1",
        backend="onnxruntime",
        precision="fp32",
        max_batch_size=8,
        inputs=(TensorInfo("x", "FP32", (-1, 3, -1)),),
        outputs=(TensorInfo("y", "FP32", (-1, 3, -1)),),
    )
    data = np.arange(12, dtype=np.float32)
    request = raw_body(info, data.tobytes())
    assert request.parameters == {"binary_data_output": True}
    assert request.headers == [("x", "FP32", (1, 3, 4))]
    decoded = from_raw(request.inputs[0], raw_of(request, 0))
    np.testing.assert_array_equal(decoded, data.reshape(1, 3, 4))
    assert "does not fill input 'x'" in refused(raw_body, info, b"\0" * 10)
    two = ModelInfo(**{**info.__dict__, "inputs": info.inputs * 2})
    assert "needs a model with one input" in refused(raw_body, two, b"")


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (b"{not json", "the request body is not valid JSON"),
        (b"[" * 10_000_000, "the request body is not valid JSON"),
        (b"[]", "the request JSON must be an object with 'inputs', got list"),
        (b"{}", "has no 'inputs' array"),
        (
            b'{"inputs": [{"name": "x", "datatype": "FP33", "shape": [1]}]}',
            "input 'x': datatype 'FP33' is not a KServe",
        ),
        (
            b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": "1,3"}]}',
            "shape must be a JSON array of integers",
        ),
        (
            b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1.0]}]}',
            "shape must be a JSON array of integers",
        ),
        (
            b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": {"a": 1}}]}',
            "input 'x': data must be a JSON array",
        ),
        (b'{"inputs": [], "id": 5}', "id must be a string"),
        (b'{"inputs": [], "parameters": {"binary_data_output": 1}}', "binary_data_output must be"),
        (
            b'{"inputs": [], "outputs": [{"parameters": {}}]}',
            "outputs[0] must be an object with a 'name'",
        ),
    ],
)
def test_json_headers_that_lie(document: bytes, message: str) -> None:
    assert message in refused(parse_body, document, None)


def test_input_sources_exactly_one() -> None:
    both = orjson.dumps(
        {
            "inputs": [
                {"name": "x", "datatype": "FP32", "shape": [1], "data": [1]}
                | {"parameters": {"binary_data_size": 4}}
            ]
        }
    )
    none = b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1]}]}'
    assert refused(parse_body, both + b"\0" * 4, len(both)).endswith(
        "it sends values and raw bytes"
    )
    assert refused(parse_body, none, None).endswith("it sends none")


def test_binary_data_output_defaults_and_per_output_override() -> None:
    request = parse_body(
        b'{"inputs": [], "parameters": {"binary_data_output": true},'
        b' "outputs": [{"name": "a"}, {"name": "b", "parameters": {"binary_data": false}}]}',
        None,
    )
    assert [(o.name, o.binary) for o in request.outputs] == [("a", True), ("b", False)]


def response(*outputs: OutputTensor) -> InferResponse:
    return InferResponse("m", "1", "", list(outputs))


def test_response_mixes_binary_and_json_outputs_and_bytes_are_length_prefixed() -> None:
    scores = np.array([[0.1, 1 / 3]], dtype=np.float32)
    request = parse_body(
        b'{"inputs": [], "parameters": {"binary_data_output": true},'
        b' "outputs": [{"name": "scores", "parameters": {"binary_data": false}},'
        b' {"name": "words"}]}',
        None,
    )
    content, length = encode_response(
        request,
        response(
            OutputTensor("scores", "FP32", (1, 2), scores),
            OutputTensor("words", "BYTES", (2,), np.array([b"ab", b""], dtype=object)),
            OutputTensor("flags", "BOOL", (2,), np.array([True, False])),  # default: binary
            OutputTensor("placed", "FP32", (2,), None),  # in shared memory
        ),
    )
    assert length is not None
    head = orjson.loads(content[:length])
    assert head["model_name"] == "m" and "id" not in head
    np.testing.assert_array_equal(
        np.array(head["outputs"][0]["data"], np.float32), scores.reshape(-1)
    )
    assert head["outputs"][1]["parameters"] == {"binary_data_size": 10}
    assert head["outputs"][3] == {"name": "placed", "datatype": "FP32", "shape": [2]}
    assert content[length:] == struct.pack("<I", 2) + b"ab" + struct.pack("<I", 0) + b"\x01\x00"


def test_json_only_response_has_no_header_length_and_refuses_non_utf8_bytes() -> None:
    request = InferRequest("", [])
    content, length = encode_response(
        request, response(OutputTensor("t", "BYTES", (1,), np.array([b"ok"], object)))
    )
    assert length is None and orjson.loads(content)["outputs"][0]["data"] == ["ok"]
    bad = response(OutputTensor("t", "BYTES", (1,), np.array([b"\xff"], object)))
    assert "not UTF-8" in refused(encode_response, request, bad)
