"""Every malformed HTTP request against the real server: 400/404 (413, 408 where the
body is the problem) with a KServe error body ``{"error"}`` as ``application/json``, never
a 500 or a hang, the same messages as the gRPC front end, and the next good request is
answered (C23 JSON tensors that lie, C24 binary extension edge cases)."""

from __future__ import annotations

import http.client
import json
import socket
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as triton_grpc
from tritonclient.utils import InferenceServerException

from ..conftest import RunningServer

INFER = "/v2/models/ppocr-cls/infer"
GOOD = {"name": "x", "datatype": "FP32", "shape": [1, 3, 48, 192]}
READ_TIMEOUT_S = 2


@pytest.fixture(scope="module")
def server(module_server, cls_dir: Path) -> RunningServer:
    return module_server(
        cls_dir,
        MMAAS_HTTP_READ_TIMEOUT_S=str(READ_TIMEOUT_S),
        MMAAS_MAX_MESSAGE_SIZE=str(1024 * 1024),
    )


def send(
    server: RunningServer, method: str, path: str, body: bytes = b"", headers: dict | None = None
) -> tuple[int, str, dict]:
    """One request on a fresh connection: status, content type, parsed JSON body."""
    connection = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        reply = connection.getresponse()
        data = reply.read()
        return reply.status, reply.getheader("content-type", ""), json.loads(data) if data else {}
    finally:
        connection.close()


def error_of(server: RunningServer, body: bytes, headers: dict | None = None, path: str = INFER):
    status, content_type, document = send(server, "POST", path, body, headers)
    assert content_type == "application/json", (status, document)
    assert set(document) == {"error"}, document
    return status, document["error"]


def binary(header: dict, blob: bytes) -> tuple[bytes, dict]:
    head = json.dumps(header).encode()
    return head + blob, {"Inference-Header-Content-Length": str(len(head))}


def good_request(server: RunningServer) -> None:
    data = np.zeros((1, 3, 48, 192), np.float32)
    body, headers = binary(
        {"inputs": [GOOD | {"parameters": {"binary_data_size": data.nbytes}}]}, data.tobytes()
    )
    status, _, document = send(server, "POST", INFER, body, headers)
    assert status == 200, document


CASES = {
    "bad JSON": (b'{"inputs": [', {}, 400, "the request body is not valid JSON"),
    "1 MB of nested [": (b"[" * 1_000_000, {}, 400, "not valid JSON"),
    "not an object": (b"[1, 2]", {}, 400, "must be an object with 'inputs'"),
    "no inputs": (b"{}", {}, 400, "has no 'inputs' array"),
    "shape as text": (
        json.dumps({"inputs": [GOOD | {"shape": "1,3", "data": [1]}]}).encode(),
        {},
        400,
        "shape must be a JSON array of integers",
    ),
    "overflowing shape": (
        json.dumps(
            {"inputs": [GOOD | {"shape": [4294967296, 4294967296, 1, 1], "data": [1]}]}
        ).encode(),
        {},
        400,
        "axis 0 is 4294967296",
    ),
    "negative dim": (
        json.dumps({"inputs": [GOOD | {"shape": [1, 3, -48, 192], "data": [1]}]}).encode(),
        {},
        400,
        "outside the optimization profile",
    ),
    "unknown datatype": (
        json.dumps({"inputs": [GOOD | {"datatype": "FP99", "data": [1]}]}).encode(),
        {},
        400,
        "'FP99' is not a KServe v2 datatype",
    ),
    "unknown input": (
        json.dumps({"inputs": [GOOD | {"name": "y", "data": [1]}]}).encode(),
        {},
        400,
        "unknown input 'y' in inputs",
    ),
    "missing input": (json.dumps({"inputs": []}).encode(), {}, 400, "missing input 'x' in inputs"),
    "one value short": (
        json.dumps({"inputs": [GOOD | {"data": [0.0] * 27647}]}).encode(),
        {},
        400,
        "data holds 27647 values, but shape [1, 3, 48, 192] needs 27648",
    ),
    "strings for FP32": (
        json.dumps({"inputs": [GOOD | {"data": ["0"] * 27648}]}).encode(),
        {},
        400,
        "data holds strings, but FP32 takes numbers",
    ),
    "ragged nesting": (
        json.dumps({"inputs": [GOOD | {"data": [[[[0.0] * 192] * 48] * 3, [0.0]]}]}).encode(),
        {},
        400,
        "data is ragged",
    ),
    "header length past the body": (
        b'{"inputs": []}',
        {"Inference-Header-Content-Length": "999"},
        400,
        "Inference-Header-Content-Length is 999, but the body holds 14 bytes",
    ),
    "header length not a number": (
        b'{"inputs": []}',
        {"Inference-Header-Content-Length": "ten"},
        400,
        "Unable to parse Inference-Header-Content-Length",
    ),
    "binary_data_size past the bytes": (
        *binary({"inputs": [GOOD | {"parameters": {"binary_data_size": 110592}}]}, b"\0" * 1000),
        400,
        "binary_data_size is 110592 bytes, but only 1000 bytes",
    ),
    "binary_data_size not the shape's": (
        *binary({"inputs": [GOOD | {"parameters": {"binary_data_size": 8}}]}, b"\0" * 8),
        400,
        "input 'x': the data holds 8 bytes, but shape [1, 3, 48, 192] of FP32",
    ),
    "bytes left over": (
        *binary({"inputs": [GOOD | {"parameters": {"binary_data_size": 110592}}]}, b"\0" * 110600),
        400,
        "unexpected additional input data: 8 bytes",
    ),
    "raw body of the wrong size": (
        b"\0" * 7,
        {"Inference-Header-Content-Length": "0"},
        400,
        "input 'x': the data holds 7 bytes, but shape [1, 3, 48, 192]",
    ),
    "unknown encoding": (
        b"{}",
        {"Content-Encoding": "br"},
        415,
        "Content-Encoding 'br' is not supported",
    ),
    "broken gzip": (b"not gzip", {"Content-Encoding": "gzip"}, 400, "not valid gzip data"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_malformed_infer_is_a_kserve_error_and_the_next_request_is_answered(
    server: RunningServer, case: str
) -> None:
    body, headers, status, message = CASES[case]
    got_status, error = error_of(server, body, headers)
    assert (got_status, message in error) == (status, True), error
    good_request(server)


def test_a_body_over_the_message_limit_is_refused_before_it_is_read(
    server: RunningServer,
) -> None:
    """413 as soon as the ``Content-Length`` says the body is over the limit, before the body
    is read (as Triton does): the client sends the headers and the first 64 KiB of 1200 KiB,
    then reads the answer. (Sending the whole body races the server's close: the client
    gets a broken pipe on a loaded machine, the first CI's flake.)"""
    connection = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    try:
        connection.putrequest("POST", INFER)
        connection.putheader("Content-Length", str(1200 * 1024))
        connection.putheader("Content-Type", "application/json")
        connection.endheaders(b"\0" * (64 * 1024))
        reply = connection.getresponse()
        status, document = reply.status, json.loads(reply.read())
    finally:
        connection.close()
    assert status == 413, document
    assert "over the server's limit of 1048576 bytes" in document["error"]
    good_request(server)


def test_unknown_model_version_path_and_method(server: RunningServer) -> None:
    assert error_of(server, b"{}", path="/v2/models/nope/infer")[0] == 404
    status, error = error_of(server, b"{}", path="/v2/models/ppocr-cls/versions/9/infer")
    assert status == 404 and "has no version '9'" in error
    assert send(server, "GET", "/v2/models/nope")[0] == 404
    assert send(server, "GET", "/v2/models/nope/ready")[0] == 404
    assert send(server, "GET", "/v2/nowhere") == (404, "application/json", {"error": "Not Found"})
    assert send(server, "GET", INFER) == (405, "application/json", {"error": "Method Not Allowed"})
    status, error = error_of(server, b'{"ready": 1}', path="/v2/repository/index")
    assert status == 400 and "'ready'" in error


def test_same_messages_as_grpc(server: RunningServer) -> None:
    request = {"inputs": [GOOD | {"shape": [1, 3, 48, 100], "data": [0.0] * 14400}]}
    _, over_http = error_of(server, json.dumps(request).encode())
    tensor = triton_grpc.InferInput("x", [1, 3, 48, 100], "FP32")
    tensor.set_data_from_numpy(np.zeros((1, 3, 48, 100), np.float32))
    with pytest.raises(InferenceServerException) as info:
        server.client().infer("ppocr-cls", [tensor])
    assert over_http == info.value.message()
    assert "outside the optimization profile" in over_http


def test_a_body_that_never_arrives_is_answered_408_in_time(server: RunningServer) -> None:
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=30) as sock:
        started = time.monotonic()
        sock.sendall(
            b"POST " + INFER.encode() + b" HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n{}"
        )
        reply = sock.recv(65536)
        assert time.monotonic() - started < READ_TIMEOUT_S + 5
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408") and b"content-type: application/json" in head.lower()
    assert b"did not arrive within 2 s (2 of 1000 bytes received" in body
    good_request(server)


def test_requests_that_are_not_http_are_refused_and_the_server_goes_on(
    server: RunningServer,
) -> None:
    """Garbage and a broken Content-Length never reach the app: Granian (hyper) answers
    400 and closes the connection (no body: the request was not HTTP); headers that never
    end are dropped after MMAAS_HTTP_READ_TIMEOUT_S."""
    for garbage in (b"GARBAGE\r\n\r\n", b"POST / HTTP/1.1\r\nContent-Length: abc\r\n\r\n"):
        with socket.create_connection(("127.0.0.1", server.http_port), timeout=30) as sock:
            sock.sendall(garbage)
            assert sock.recv(65536).startswith(b"HTTP/1.1 400 Bad Request")
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=30) as sock:
        started = time.monotonic()
        sock.sendall(b"POST " + INFER.encode() + b" HTTP/1.1\r\nHost: t\r\n")
        assert sock.recv(65536) == b""  # closed, not left hanging
        assert time.monotonic() - started < READ_TIMEOUT_S + 5
    good_request(server)


def test_failures_are_counted_like_grpc_ones(server: RunningServer) -> None:
    before = server.metric("nv_inference_request_failure", model="ppocr-cls", reason="REJECTED")
    error_of(server, b'{"inputs": []}')
    error_of(server, b"{}", path="/v2/models/nope/infer")  # no model: nothing to count in
    after = server.metric("nv_inference_request_failure", model="ppocr-cls", reason="REJECTED")
    assert after - before == 1
