"""The HTTP codec without a server: the JSON header and the binary tensor data extension
(C24), JSON tensors that lie (C23), and the response encoding (binary outputs with their
header length, BYTES as 4-byte length + bytes, JSON numbers that round-trip exactly)."""

from __future__ import annotations

import struct

import numpy as np
import orjson
import pytest

from mmaas.core.datatypes import BFLOAT16
from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.server.http.request import InputTensor, OutputTensor, header_length, parse_body, raw_body
from mmaas.server.http.tensors import decode_inputs, encode_response, from_json, json_data
from mmaas.server.status import InvalidArgument


def binary_body(header: dict, *blobs: bytes) -> tuple[bytes, int]:
    head = orjson.dumps(header)
    return head + b"".join(blobs), len(head)


def decoded(body: bytes, length: int | None) -> dict[str, np.ndarray]:
    return decode_inputs(parse_body(body, length), length is not None)


def refused(call, *args) -> str:
    with pytest.raises(InvalidArgument) as info:
        call(*args)
    return info.value.message


def tensor(data, datatype: str = "FP32", shape=(2, 2)) -> InputTensor:
    return InputTensor("x", datatype, tuple(shape), {}, data)


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
    arrays = decoded(*binary_body(header, a.tobytes(), c.tobytes()))
    np.testing.assert_array_equal(arrays["a"], a)
    np.testing.assert_array_equal(arrays["b"], np.array([1, 2], np.int32))
    np.testing.assert_array_equal(arrays["c"], c)
    assert arrays["b"].dtype == np.int32


@pytest.mark.parametrize(
    ("sizes", "blob", "message"),
    [
        ((16, 16), b"\0" * 24, "binary_data_size is 16 bytes, but only 8 bytes"),
        ((8, 8), b"\0" * 16, "needs 16 bytes, got 8"),
        ((16, 8), b"\0" * 40, "needs 16 bytes, got 8"),
        ((16, 16), b"\0" * 33, "unexpected additional input data: 1 bytes"),
    ],
)
def test_binary_sizes_that_disagree_with_the_bytes_or_the_shape(sizes, blob, message) -> None:
    header = {
        "inputs": [
            {"name": n, "datatype": "FP32", "shape": [4], "parameters": {"binary_data_size": s}}
            for n, s in zip("ab", sizes, strict=True)
        ]
    }
    assert message in refused(decoded, *binary_body(header, blob))


def test_binary_input_without_the_header_length_is_refused() -> None:
    body = orjson.dumps(
        {
            "inputs": [
                {
                    "name": "a",
                    "datatype": "FP32",
                    "shape": [1],
                    "parameters": {"binary_data_size": 4},
                }
            ]
        }
    )
    assert "no Inference-Header-Content-Length header" in refused(decoded, body, None)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("abc", "Unable to parse Inference-Header-Content-Length, got: 'abc'"),
        ("-1", "Inference-Header-Content-Length is -1, but the body holds 10 bytes"),
        ("11", "Inference-Header-Content-Length is 11, but the body holds 10 bytes"),
    ],
)
def test_header_length_outside_the_body(value: str, message: str) -> None:
    assert message in refused(header_length, value, 10)


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
    body = raw_body(info, data.tobytes())
    assert body.binary_output and body.headers == [("x", "FP32", (1, 3, 4))]
    np.testing.assert_array_equal(decode_inputs(body, True)["x"], data.reshape(1, 3, 4))
    assert "does not fill input 'x'" in refused(raw_body, info, b"\0" * 10)
    two = ModelInfo(**{**info.__dict__, "inputs": info.inputs * 2})
    assert "needs a model with one input" in refused(raw_body, two, b"")


@pytest.mark.parametrize(
    ("item", "message"),
    [
        (tensor([1.0, 2.0, 3.0]), "data holds 3 values, but shape [2, 2] needs 4"),
        (tensor([[1.0, 2.0], [3.0]]), "data is ragged"),
        (tensor([[1.0, 2.0, 3.0, 4.0]]), "data is nested as [1, 4], but shape is [2, 2]"),
        (tensor(["1.0", "2", "3", "4"]), "data holds strings, but FP32 takes numbers"),
        (tensor([1.5, 2.0, 3.0, 4.0], "INT32"), "data holds floats, but INT32 takes integers"),
        (tensor([True, False, True, False]), "data holds booleans, but FP32 takes numbers"),
        (tensor([1, 2, 3, 300], "UINT8"), "value 300 at index [3] does not fit UINT8 (0..255)"),
        (tensor([1.0, 2.0, 3.0, 1e39]), "value 1e+39 at index [3] does not fit FP32"),
        (tensor([1, 2, 3, 3.4e38], "BF16"), "value 3.4e+38 at index [3] does not fit BF16"),
        (tensor([1, None, 3, 4]), "values of mixed JSON types"),
        (tensor({"a": 1}), "data must be a JSON array"),
        (tensor(["1", "2", "3", "4"], "BF16"), "data holds strings, but BF16 takes numbers"),
        (tensor([1, 2, 3, 4], "BYTES"), "data holds integers, but BYTES takes strings"),
        (tensor([1, 2], shape=(4294967296, 4294967296)), "data holds 2 values, but shape"),
    ],
)
def test_json_tensors_that_lie(item: InputTensor, message: str) -> None:
    assert message in refused(from_json, item)


def test_json_tensors_flat_or_nested_and_numbers_for_floats() -> None:
    flat = from_json(tensor([1, 2.5, 3, 4]))
    nested = from_json(tensor([[1, 2.5], [3, 4]]))
    assert flat.dtype == np.float32 and flat.shape == (2, 2)
    np.testing.assert_array_equal(flat, nested)
    words = from_json(tensor(["a", "ü"], "BYTES", (2,)))
    assert words.tolist() == [b"a", "ü".encode()]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (b"{not json", "the request body is not valid JSON"),
        (b"[" * 10_000_000, "the request body is not valid JSON"),
        (b"[]", "the request JSON must be an object with 'inputs', got list"),
        (b"{}", "has no 'inputs' array"),
        (
            b'{"inputs": [{"name": "x", "datatype": "FP33", "shape": [1]}]}',
            "'FP33' is not a KServe",
        ),
        (
            b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": "1,3"}]}',
            "shape must be a JSON array of integers",
        ),
        (
            b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1.0]}]}',
            "shape must be a JSON array of integers",
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
    assert "it sets 'data', 'binary_data_size'" in refused(decoded, both + b"\0" * 4, len(both))
    assert "it sets none" in refused(decoded, none, None)


def test_binary_data_output_defaults_and_per_output_override() -> None:
    body = parse_body(
        b'{"inputs": [], "parameters": {"binary_data_output": true},'
        b' "outputs": [{"name": "a"}, {"name": "b", "parameters": {"binary_data": false}}]}',
        None,
    )
    assert [(o.name, o.binary) for o in body.outputs] == [("a", True), ("b", False)]
    assert body.binary_output


def test_response_mixes_binary_and_json_outputs_and_bytes_are_length_prefixed() -> None:
    scores = np.array([[0.1, 1 / 3]], dtype=np.float32)
    words = np.array([b"ab", b""], dtype=object)
    outputs = [
        (OutputTensor("scores", False), "FP32", scores),
        (OutputTensor("words", True), "BYTES", words),
        (OutputTensor("flags", True), "BOOL", np.array([True, False])),
    ]
    content, length = encode_response({"model_name": "m", "model_version": "1"}, outputs)
    assert length is not None
    head = orjson.loads(content[:length])
    assert head["outputs"][0] == {
        "name": "scores",
        "datatype": "FP32",
        "shape": [1, 2],
        "data": head["outputs"][0]["data"],
    }
    np.testing.assert_array_equal(
        np.array(head["outputs"][0]["data"], np.float32), scores.reshape(-1)
    )
    assert head["outputs"][1]["parameters"] == {"binary_data_size": 10}
    assert content[length:] == struct.pack("<I", 2) + b"ab" + struct.pack("<I", 0) + b"\x01\x00"


def test_json_only_response_has_no_header_length_and_refuses_non_utf8_bytes() -> None:
    content, length = encode_response(
        {}, [(OutputTensor("t", False), "BYTES", np.array([b"ok"], object))]
    )
    assert length is None and orjson.loads(content)["outputs"][0]["data"] == ["ok"]
    bad = [(OutputTensor("t", False), "BYTES", np.array([b"\xff"], object))]
    assert "not UTF-8" in refused(encode_response, {}, bad)


def test_bf16_json_numbers_in_and_out() -> None:
    """BF16 as JSON numbers: rounded to bfloat16 in, exact FP32 out (ml_dtypes.bfloat16)."""
    decoded = from_json(tensor([1.5, -2.0, 0.1, 65280.0], "BF16"))
    assert decoded.dtype == BFLOAT16 and decoded.shape == (2, 2)
    assert decoded.astype(np.float32).tolist() == [[1.5, -2.0], [0.10009765625, 65280.0]]
    out = json_data("y", "BF16", decoded)
    assert out.dtype == np.float32 and out.tolist() == [1.5, -2.0, 0.10009765625, 65280.0]
