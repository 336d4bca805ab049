"""KServe v2 tensors <-> numpy (mmaas.server.grpc.converters), checked against tritonclient's
own encoder (``InferInput.set_data_from_numpy``) so that the wire format is the client's."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import tritonclient.grpc as triton
from tritonclient.grpc import service_pb2
from tritonclient.utils import deserialize_bf16_tensor

from mmaas.core.datatypes import BFLOAT16, NUMPY_BY_DATATYPE
from mmaas.core.errors import UsageError
from mmaas.server.grpc.converters import (
    decode_bytes,
    encode_bytes,
    from_array,
    from_outputs,
    to_array,
    to_inputs,
)
from mmaas.server.status import InvalidArgument

FIXED = [name for name in NUMPY_BY_DATATYPE if name not in ("BF16", "BYTES")]
DTYPES = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
}


InputTensor = service_pb2.ModelInferRequest.InferInputTensor  # one input of a request


def sample(datatype: str, shape: tuple[int, ...] = (2, 3)) -> np.ndarray:
    rng = np.random.default_rng(7)
    if datatype == "BOOL":
        return rng.integers(0, 2, shape).astype(bool)
    return (rng.random(shape) * 100).astype(DTYPES[datatype])


def client_tensor(name: str, array: np.ndarray, datatype: str) -> tuple[object, bytes]:
    """The tensor and raw bytes exactly as tritonclient puts them on the wire."""
    infer_input = triton.InferInput(name, list(array.shape), datatype)
    infer_input.set_data_from_numpy(array)
    return infer_input._get_tensor(), infer_input._get_content()


@pytest.mark.parametrize("datatype", FIXED)
def test_raw_contents_decode_what_tritonclient_encodes(datatype: str) -> None:
    array = sample(datatype)
    tensor, raw = client_tensor("x", array, datatype)
    decoded = to_array(tensor, raw)
    assert decoded.dtype == array.dtype
    np.testing.assert_array_equal(decoded, array)


@pytest.mark.parametrize("datatype", [d for d in FIXED if d != "FP16"])
def test_typed_contents_round_trip(datatype: str) -> None:
    array = sample(datatype)
    tensor = InputTensor(name="x")
    assert from_array(tensor, array, typed=True) is None
    assert tensor.datatype == datatype and list(tensor.shape) == [2, 3]
    decoded = to_array(tensor, None)
    assert decoded.dtype == array.dtype
    np.testing.assert_array_equal(decoded, array)


def test_fp16_has_no_typed_contents_field() -> None:
    tensor = InputTensor(name="x", datatype="FP16", shape=[2])
    tensor.contents.fp32_contents.extend([1.0, 2.0])
    with pytest.raises(InvalidArgument, match=r"'x': FP16 has no typed contents field.*raw"):
        to_array(tensor, None)
    with pytest.raises(UsageError, match="FP16 has no typed contents field"):
        from_array(InputTensor(), sample("FP16"), typed=True)


def test_typed_contents_in_the_wrong_field_name_both_fields() -> None:
    tensor = InputTensor(name="x", datatype="FP32", shape=[2])
    tensor.contents.int_contents.extend([1, 2])
    with pytest.raises(
        InvalidArgument,
        match=r"FP32 data goes in contents.fp32_contents, "
        r"got contents.int_contents",
    ):
        to_array(tensor, None)


def test_typed_value_count_must_match_shape() -> None:
    tensor = InputTensor(name="x", datatype="INT64", shape=[2, 3])
    tensor.contents.int64_contents.extend([1, 2, 3, 4, 5])
    with pytest.raises(
        InvalidArgument, match=r"contents.int64_contents holds 5 values, but shape \[2, 3\] needs 6"
    ):
        to_array(tensor, None)


def test_typed_values_outside_the_datatype_range_are_refused() -> None:
    tensor = InputTensor(name="x", datatype="UINT8", shape=[2])
    tensor.contents.uint_contents.extend([1, 300])
    with pytest.raises(
        InvalidArgument,
        match=r"contents.uint_contents: value 300 at index \[1\] does not fit UINT8 \(0..255\)",
    ):
        to_array(tensor, None)


def test_raw_byte_length_must_equal_shape_times_element_size() -> None:
    array = np.zeros((1, 3, 4, 4), dtype=np.float64)  # FP64 data labelled FP32 (C17)
    tensor = InputTensor(name="x", datatype="FP32", shape=[1, 3, 4, 4])
    with pytest.raises(InvalidArgument) as info:
        to_array(tensor, array.tobytes())
    assert str(info.value) == (
        "input 'x': raw_input_contents holds 384 bytes, but shape "
        "[1, 3, 4, 4] of FP32 (4 bytes each) needs 192"
    )


def test_unknown_datatype_and_negative_dims_are_refused() -> None:
    tensor = InputTensor(name="x", datatype="FLOAT", shape=[1])
    with pytest.raises(InvalidArgument, match="'FLOAT' is not a KServe v2 datatype"):
        to_array(tensor, b"\0\0\0\0")
    tensor = InputTensor(name="x", datatype="FP32", shape=[-1, 2])
    with pytest.raises(InvalidArgument, match=r"shape \[-1, 2\] has a negative dim"):
        to_array(tensor, b"")


# C15: BYTES tensors, raw with 4-byte little-endian length prefixes, and bytes_contents.
def test_bytes_raw_with_an_empty_element_decodes_what_tritonclient_encodes() -> None:
    array = np.array([[b"hello", b""], [b"\x00\xff", "wörld".encode()]], dtype=object)
    tensor, raw = client_tensor("text", array, "BYTES")
    assert raw[:9] == struct.pack("<I", 5) + b"hello"
    decoded = to_array(tensor, raw)
    assert decoded.dtype == object and decoded.shape == (2, 2)
    assert decoded.tolist() == array.tolist()


def test_bytes_prefix_claiming_more_than_follows_is_invalid() -> None:
    raw = struct.pack("<I", 3) + b"abc" + struct.pack("<I", 50) + b"short"
    tensor = InputTensor(name="text", datatype="BYTES", shape=[2])
    with pytest.raises(
        InvalidArgument,
        match=r"'text': raw_input_contents: BYTES element 1 claims 50 bytes "
        r"but only 5 follow",
    ):
        to_array(tensor, raw)


def test_bytes_cut_prefix_missing_elements_and_leftovers_are_invalid() -> None:
    with pytest.raises(InvalidArgument, match="element 1 of 2 is missing"):
        decode_bytes(struct.pack("<I", 1) + b"a" + b"\x01\x00", 2, "input 't'")
    with pytest.raises(InvalidArgument, match="3 bytes left after the 1 BYTES elements"):
        decode_bytes(struct.pack("<I", 1) + b"a" + b"xyz", 1, "input 't'")


def test_bytes_contents_typed_and_encoding_round_trip() -> None:
    tensor = InputTensor(name="t", datatype="BYTES", shape=[3])
    tensor.contents.bytes_contents.extend([b"a", b"", b"ccc"])
    assert to_array(tensor, None).tolist() == [b"a", b"", b"ccc"]
    assert decode_bytes(encode_bytes([b"a", b"", b"ccc"]), 3, "t") == [b"a", b"", b"ccc"]


def test_bytes_outputs_encode_str_and_bytes_as_length_prefixed_utf8() -> None:
    tensor = service_pb2.ModelInferResponse.InferOutputTensor(name="y")
    raw = from_array(tensor, np.array(["é", "ab"], dtype=object))
    assert tensor.datatype == "BYTES" and list(tensor.shape) == [2]
    assert raw == struct.pack("<I", 2) + "é".encode() + struct.pack("<I", 2) + b"ab"


def test_to_inputs_pairs_raw_entries_with_inputs_in_order() -> None:
    request = service_pb2.ModelInferRequest()
    a, b = sample("FP32"), sample("INT64", (4,))
    for name, array in (("a", a), ("b", b)):
        request.raw_input_contents.append(from_array(request.inputs.add(name=name), array))
    arrays = to_inputs(request.inputs, request.raw_input_contents)
    np.testing.assert_array_equal(arrays["a"], a)
    np.testing.assert_array_equal(arrays["b"], b)


def test_to_inputs_refuses_unpaired_mixed_and_repeated_inputs() -> None:
    request = service_pb2.ModelInferRequest()
    request.raw_input_contents.append(from_array(request.inputs.add(name="a"), sample("FP32")))
    from_array(request.inputs.add(name="b"), sample("FP32"), typed=True)
    with pytest.raises(InvalidArgument, match="raw_input_contents has 1 entries for 2 inputs"):
        to_inputs(request.inputs, request.raw_input_contents)
    request.raw_input_contents.append(b"\0" * 24)
    with pytest.raises(InvalidArgument, match="'b' has both raw_input_contents and typed"):
        to_inputs(request.inputs, request.raw_input_contents)
    request = service_pb2.ModelInferRequest()
    for _ in range(2):
        request.raw_input_contents.append(from_array(request.inputs.add(name="a"), sample("FP32")))
    with pytest.raises(InvalidArgument, match="input 'a' appears twice"):
        to_inputs(request.inputs, request.raw_input_contents)


def test_from_outputs_reads_back_with_tritonclient() -> None:
    response = service_pb2.ModelInferResponse(model_name="m")
    boxes, labels = sample("FP16", (1, 4)), np.array([b"cat", b""], dtype=object)
    from_outputs(response, {"boxes": boxes, "labels": labels})
    result = triton.InferResult(response)
    np.testing.assert_array_equal(result.as_numpy("boxes"), boxes)
    assert result.as_numpy("labels").tolist() == [b"cat", b""]


# BF16 (ml_dtypes.bfloat16): tritonclient sends float32 arrays cut to 2-byte words.
BF16_VALUES = np.array([[1.5, -2.0, 3.140625], [0.0, 65280.0, -0.0078125]], np.float32)


def test_bf16_raw_decodes_what_tritonclient_encodes_as_bfloat16() -> None:
    tensor, raw = client_tensor("x", BF16_VALUES, "BF16")
    assert len(raw) == 12
    decoded = to_array(tensor, raw)
    assert decoded.dtype == BFLOAT16 and decoded.shape == (2, 3)
    np.testing.assert_array_equal(decoded.astype(np.float32), BF16_VALUES)


def test_bf16_outputs_are_labelled_bf16_and_read_back_by_tritonclient() -> None:
    response = service_pb2.ModelInferResponse()
    from_outputs(response, {"y": BF16_VALUES.astype(BFLOAT16)})
    assert response.outputs[0].datatype == "BF16"
    words = deserialize_bf16_tensor(response.raw_output_contents[0])
    np.testing.assert_array_equal(words.reshape(2, 3), BF16_VALUES)


def test_bf16_typed_contents_travel_as_fp32_and_round_trip() -> None:
    tensor = InputTensor(name="x")
    assert from_array(tensor, BF16_VALUES.astype(BFLOAT16), typed=True) is None
    assert tensor.datatype == "BF16"
    assert list(tensor.contents.fp32_contents) == BF16_VALUES.reshape(-1).tolist()
    decoded = to_array(tensor, None)
    assert decoded.dtype == BFLOAT16
    np.testing.assert_array_equal(decoded.astype(np.float32), BF16_VALUES)


def test_bf16_typed_value_beyond_the_bfloat16_range_is_refused() -> None:
    tensor = InputTensor(name="x", datatype="BF16", shape=[2])
    tensor.contents.fp32_contents.extend([1.0, 3.4e38])  # a float32, infinite as bfloat16
    with pytest.raises(InvalidArgument, match=r"'x': contents.fp32_contents: value .* BF16"):
        to_array(tensor, None)
