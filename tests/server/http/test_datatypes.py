"""Tensors over the HTTP front end against the real server (subprocess) with
tritonclient.http: every datatype and BYTES round-trip as JSON and as binary data, and
requested outputs mix the two (an unknown output is a 400 naming it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

from .helpers import http_input


def test_every_datatype_round_trips_as_json_and_binary(module_server, datatypes_dir: Path) -> None:
    server = module_server(datatypes_dir)
    client = triton.InferenceServerClient(server.http_url)
    arrays = {
        "a": np.array([[0.5, -1.25, 3, 32000]] * 2, np.float16),
        "b": np.array([[2**62, -(2**62), 0, 1]] * 2, np.int64),
        "c": np.array([[2**30, -(2**30), 0, 1]] * 2, np.int32),
        "d": np.array([[True, False, True, False]] * 2),
        "e": np.array([[0, 255, 7, 1]] * 2, np.uint8),
    }
    types = {"a": "FP16", "b": "INT64", "c": "INT32", "d": "BOOL", "e": "UINT8"}
    expected = {
        "a_out": arrays["a"] * 2,
        "b_out": -arrays["b"],
        "c_out": arrays["c"] * 2,
        "d_out": ~arrays["d"],
        "e_out": arrays["e"],
    }
    for binary in (True, False):
        inputs = [http_input(n, a, types[n], binary) for n, a in arrays.items()]
        outputs = [triton.InferRequestedOutput(n, binary_data=binary) for n in expected]
        result = client.infer("datatypes", inputs, outputs=outputs)
        for name, array in expected.items():
            got = result.as_numpy(name)
            assert got.dtype == array.dtype, name
            np.testing.assert_array_equal(got, array)


def test_bytes_as_json_and_binary(module_server, strings_dir: Path) -> None:
    server = module_server(strings_dir)
    client = triton.InferenceServerClient(server.http_url)
    words = np.array(["héllo".encode(), b"", b"x" * 300], dtype=object)
    for binary in (True, False):
        result = client.infer(
            "strings",
            [http_input("text", words, "BYTES", binary)],
            outputs=[triton.InferRequestedOutput("same", binary_data=binary)],
        )
        got = result.as_numpy("same").tolist()  # tritonclient gives JSON strings as str
        assert got == (words.tolist() if binary else [w.decode() for w in words])


def test_requested_outputs_mixed_binary_and_json(module_server, two_outputs_dir: Path) -> None:
    server = module_server(two_outputs_dir)
    client = triton.InferenceServerClient(server.http_url)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    outputs = [
        triton.InferRequestedOutput("scores", binary_data=False),
        triton.InferRequestedOutput("boxes", binary_data=True),
    ]
    result = client.infer("two-outputs", [http_input("x", x, "FP32")], outputs=outputs)
    assert [o["name"] for o in result.get_response()["outputs"]] == ["scores", "boxes"]
    np.testing.assert_array_equal(result.as_numpy("boxes"), 2 * x)
    np.testing.assert_array_equal(result.as_numpy("scores"), x.sum(axis=1, keepdims=True))
    only = client.infer(
        "two-outputs", [http_input("x", x, "FP32")], outputs=[triton.InferRequestedOutput("scores")]
    )
    assert [o["name"] for o in only.get_response()["outputs"]] == ["scores"]
    with pytest.raises(InferenceServerException) as info:
        client.infer(
            "two-outputs",
            [http_input("x", x, "FP32")],
            outputs=[triton.InferRequestedOutput("nope")],
        )
    assert info.value.status() == "400" and "unknown output 'nope'" in info.value.message()
