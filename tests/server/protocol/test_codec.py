"""The one tensor codec alone (:mod:`mmaas.server.protocol.codec`): raw bytes as
tritonclient puts them on the wire, typed values as JSON and gRPC typed contents carry
them, and every malformed tensor with its one message (count and size mismatches, ragged
JSON, values of the wrong kind or out of range, BYTES length prefixes, BF16, BOOL)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import tritonclient.grpc as triton
from tritonclient.utils import deserialize_bf16_tensor, deserialize_bytes_tensor

from mmaas.core.datatypes import BFLOAT16, NUMPY_BY_DATATYPE
from mmaas.server.protocol.codec import (
    decode_bytes,
    encode_bytes,
    from_raw,
    from_values,
    numpy_dtype,
    raw_view,
    to_raw,
    to_values,
)
from mmaas.server.protocol.types import InferInput, RawBytes, one_source
from mmaas.server.status import InvalidArgument

FIXED = [name for name in NUMPY_BY_DATATYPE if name not in ("BF16", "BYTES")]
BF16_VALUES = np.array([[1.5, -2.0, 3.140625], [0.0, 65280.0, -0.0078125]], np.float32)


def tensor(datatype: str = "FP32", shape: tuple[int, ...] = (2, 2), name: str = "x"):
    return InferInput(name, datatype, shape, RawBytes(b""))


def sample(datatype: str, shape: tuple[int, ...] = (2, 3)) -> np.ndarray:
    rng = np.random.default_rng(7)
    if datatype == "BOOL":
        return rng.integers(0, 2, shape).astype(bool)
    return (rng.random(shape) * 100).astype(NUMPY_BY_DATATYPE[datatype])


def client_raw(array: np.ndarray, datatype: str) -> bytes:
    """The raw bytes exactly as tritonclient puts them on the wire."""
    infer_input = triton.InferInput("x", list(array.shape), datatype)
    infer_input.set_data_from_numpy(array)
    return infer_input._get_content()


def refused(call, *args) -> str:
    with pytest.raises(InvalidArgument) as info:
        call(*args)
    return info.value.message


@pytest.mark.parametrize("datatype", FIXED)
def test_raw_bytes_decode_what_tritonclient_encodes_and_encode_back(datatype: str) -> None:
    array = sample(datatype)
    raw = client_raw(array, datatype)
    decoded = from_raw(tensor(datatype, (2, 3)), raw)
    assert decoded.dtype == array.dtype
    np.testing.assert_array_equal(decoded, array)
    assert to_raw(decoded) == raw


@pytest.mark.parametrize("datatype", [d for d in FIXED if d != "FP16"])
def test_typed_values_decode_to_the_datatype(datatype: str) -> None:
    array = sample(datatype)
    decoded = from_values(tensor(datatype, (2, 3)), array.reshape(-1).tolist())
    assert decoded.dtype == array.dtype
    np.testing.assert_array_equal(decoded, array)


def test_flat_and_nested_values_decode_alike() -> None:
    flat = from_values(tensor(), [1, 2.5, 3, 4])
    nested = from_values(tensor(), [[1, 2.5], [3, 4]])
    assert flat.dtype == np.float32 and flat.shape == (2, 2)
    np.testing.assert_array_equal(flat, nested)


def test_12_bytes_for_fp32_2x2_names_both_sizes() -> None:
    assert refused(from_raw, tensor(), b"\0" * 12) == (
        "input 'x': the data holds 12 bytes, but shape [2, 2] of FP32 (4 bytes each) needs 16"
    )
    where = " in shared memory region 'r'"
    assert refused(from_raw, tensor(), b"\0" * 12, where).startswith(
        "input 'x': the data in shared memory region 'r' holds 12 bytes"
    )


@pytest.mark.parametrize(
    ("values", "datatype", "shape", "message"),
    [
        ([1.0, 2.0, 3.0], "FP32", (2, 2), "the data holds 3 values, but shape [2, 2] needs 4"),
        ([[1.0, 2.0], [3.0]], "FP32", (2, 2), "the data is ragged or nested deeper"),
        ([[["a"]], ["b"]], "BYTES", (2,), "the data is ragged or nested deeper than shape [2]"),
        (
            [[1.0, 2.0, 3.0, 4.0]],
            "FP32",
            (2, 2),
            "the data is nested as [1, 4], but shape is [2, 2]",
        ),
        (["1.0", "2", "3", "4"], "FP32", (2, 2), "the data holds strings, but FP32 takes numbers"),
        ([1.5, 2.0, 3.0, 4.0], "INT32", (2, 2), "the data holds floats, but INT32 takes integers"),
        ([True, False, True, False], "FP32", (2, 2), "holds booleans, but FP32 takes numbers"),
        ([1, 0, 1, 0], "BOOL", (2, 2), "the data holds integers, but BOOL takes booleans"),
        ([1, None, 3, 4], "FP32", (2, 2), "the data holds values of mixed JSON types"),
        (["1", "2", "3", "4"], "BF16", (2, 2), "the data holds strings, but BF16 takes numbers"),
        ([1, 2, 3, 4], "BYTES", (2, 2), "the data holds integers, but BYTES takes strings"),
        ([1, 2], "FP32", (4294967296, 4294967296), "the data holds 2 values, but shape"),
    ],
)
def test_values_that_lie_about_their_shape_or_kind(values, datatype, shape, message) -> None:
    assert message in refused(from_values, tensor(datatype, shape), values)


@pytest.mark.parametrize(
    ("values", "datatype", "message"),
    [
        (
            [1, 2, 3, 300],
            "UINT8",
            "input 'x': value 300 at index [1, 1] does not fit UINT8 (0..255)",
        ),
        ([1, 2, 3, -1], "UINT32", "value -1 at index [1, 1] does not fit UINT32"),
        ([1, 2, 3, 2**40 + 5], "INT32", "value 1099511627781 at index [1, 1] does not fit INT32"),
        ([1.0, 2.0, 3.0, 1e39], "FP32", "value 1e+39 at index [1, 1] does not fit FP32"),
        ([1, 2, 3, 3.4e38], "BF16", "value 3.4e+38 at index [1, 1] does not fit BF16"),
        ([1, 2, 3, 70000.0], "FP16", "value 70000.0 at index [1, 1] does not fit FP16"),
    ],
)
def test_values_out_of_the_datatype_range_are_refused_never_wrapped(
    values, datatype, message
) -> None:
    assert message in refused(from_values, tensor(datatype), values)


def test_unknown_datatype_and_negative_dims_are_refused() -> None:
    assert "datatype 'FLOAT' is not a KServe v2 datatype (BOOL, UINT8" in refused(
        from_raw, tensor("FLOAT"), b"\0" * 16
    )
    assert "datatype None is not a KServe v2 datatype" in refused(numpy_dtype, None, "input 'x'")
    assert "shape [-1, 2] has a negative dim" in refused(from_values, tensor("FP32", (-1, 2)), [])


# BYTES: 4-byte little-endian length prefixes, empty elements allowed.
def test_bytes_raw_with_an_empty_element_decodes_what_tritonclient_encodes() -> None:
    array = np.array([[b"hello", b""], [b"\x00\xff", "wörld".encode()]], dtype=object)
    raw = client_raw(array, "BYTES")
    assert raw[:9] == struct.pack("<I", 5) + b"hello"
    decoded = from_raw(tensor("BYTES"), raw)
    assert decoded.dtype == object and decoded.tolist() == array.tolist()
    assert deserialize_bytes_tensor(to_raw(decoded)).tolist() == array.reshape(-1).tolist()


@pytest.mark.parametrize(
    ("raw", "count", "message"),
    [
        (
            struct.pack("<I", 3) + b"abc" + struct.pack("<I", 50) + b"short",
            2,
            "input 'x': BYTES element 1 claims 50 bytes but only 5 follow its length prefix",
        ),
        (struct.pack("<I", 1) + b"a" + b"\x01\x00", 2, "BYTES element 1 of 2 is missing"),
        (struct.pack("<I", 1) + b"a" + b"xyz", 1, "3 bytes left after the 1 BYTES elements"),
    ],
)
def test_bytes_prefixes_that_lie_are_refused(raw: bytes, count: int, message: str) -> None:
    assert message in refused(from_raw, tensor("BYTES", (count,)), raw)


def test_bytes_values_keep_every_byte_and_strings_are_utf8() -> None:
    decoded = from_values(tensor("BYTES", (3,)), [b"a\x00", "ü", b""])
    assert decoded.tolist() == [b"a\x00", "ü".encode(), b""]  # trailing NUL kept
    assert decode_bytes(encode_bytes([b"a", b"", b"ccc"]), 3, "t") == [b"a", b"", b"ccc"]
    assert to_raw(np.array(["é", "ab"], dtype=object)) == (
        struct.pack("<I", 2) + "é".encode() + struct.pack("<I", 2) + b"ab"
    )


def test_bytes_that_are_not_utf8_cannot_be_json_values() -> None:
    assert to_values("t", np.array([b"ok"], object)) == ["ok"]
    assert "output 't' holds bytes that are not UTF-8" in refused(
        to_values, "t", np.array([b"\xff"], object)
    )


# BF16 (ml_dtypes.bfloat16): tritonclient sends float32 arrays cut to 2-byte words.
def test_bf16_raw_decodes_what_tritonclient_encodes_and_reads_back() -> None:
    raw = client_raw(BF16_VALUES, "BF16")
    assert len(raw) == 12
    decoded = from_raw(tensor("BF16", (2, 3)), raw)
    assert decoded.dtype == BFLOAT16
    np.testing.assert_array_equal(decoded.astype(np.float32), BF16_VALUES)
    words = deserialize_bf16_tensor(to_raw(decoded))
    np.testing.assert_array_equal(words.reshape(2, 3), BF16_VALUES)
    assert "holds 10 bytes, but shape [2, 3] of BF16 (2 bytes each) needs 12" in refused(
        from_raw, tensor("BF16", (2, 3)), raw[:10]
    )


def test_bf16_values_round_to_bfloat16_and_print_as_the_exact_fp32() -> None:
    decoded = from_values(tensor("BF16"), [1.5, -2.0, 0.1, 65280.0])
    assert decoded.dtype == BFLOAT16
    assert decoded.astype(np.float32).tolist() == [[1.5, -2.0], [0.10009765625, 65280.0]]
    out = to_values("y", decoded)
    assert out.dtype == np.float32 and out.tolist() == [1.5, -2.0, 0.10009765625, 65280.0]


# BOOL: one byte each on the wire, booleans as values.
def test_bool_is_one_byte_each_and_takes_booleans() -> None:
    flags = np.array([True, False, True], bool)
    assert to_raw(flags) == b"\x01\x00\x01"
    assert from_raw(tensor("BOOL", (3,)), b"\x01\x00\x01").tolist() == [True, False, True]
    assert from_values(tensor("BOOL", (3,)), [True, False, True]).dtype == np.bool_
    assert "the data holds 2 bytes, but shape [3] of BOOL (1 bytes each) needs 3" in refused(
        from_raw, tensor("BOOL", (3,)), b"\x01\x00"
    )


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ([], "input 'x' needs exactly one data source: values (HTTP JSON 'data'"),
        ([], "; it sends none"),
        (["shared memory", "values"], "; it sends values and shared memory"),
        (["raw bytes", "values"], "; it sends values and raw bytes"),
    ],
)
def test_an_input_names_exactly_one_data_source(given: list[str], message: str) -> None:
    assert message in refused(one_source, "x", given)
    assert one_source("x", ["raw bytes"]) == "raw bytes"


@pytest.mark.parametrize(
    "array",
    [
        np.arange(12, dtype=np.float32).reshape(3, 4),
        np.arange(24, dtype=np.int64).reshape(4, 6)[:, ::2],  # not contiguous
        np.ones((2, 3), BFLOAT16),
        np.array([[True, False]]),
        np.zeros((0, 3), np.float16),
        np.array([b"ab", b""], dtype=object),
    ],
)
def test_raw_view_holds_the_raw_bytes_of_every_array(array: np.ndarray) -> None:
    view = raw_view(array)
    assert len(view) == len(to_raw(array)) and bytes(view) == to_raw(array)


def test_raw_view_of_a_contiguous_array_is_its_own_memory() -> None:
    array = np.arange(4, dtype=np.float32)
    view = raw_view(array)
    array[0] = 7.0
    assert bytes(view[:4]) == np.float32(7.0).tobytes()
