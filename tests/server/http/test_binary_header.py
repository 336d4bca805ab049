"""``Inference-Header-Content-Length`` read strictly, over a raw socket (so the header can
be sent twice, in either order, exactly as written): one value only, decimal digits,
within the body; a value that cuts or overruns the JSON header is refused naming the
header, the value and the body's length; endpoints without a binary part refuse it."""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from ..conftest import RunningServer

HEADER = "Inference-Header-Content-Length"
PATH = "/v2/models/mistakes/infer"


@pytest.fixture(scope="module")
def server(module_server: Callable[..., RunningServer], mistakes_dir: Path) -> RunningServer:
    return module_server(mistakes_dir)


def send(server: RunningServer, path: str, body: bytes, headers: list[tuple[str, str]]) -> tuple:
    """POST ``body`` to ``path`` with ``headers`` as written, over a fresh socket;
    ``(status, decoded JSON body)``."""
    lines = [f"POST {path} HTTP/1.1", f"Host: {server.http_url}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers]
    lines += [f"Content-Length: {len(body)}", "", ""]
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=30) as sock:
        sock.sendall("\r\n".join(lines).encode() + body)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    head, _, payload = reply.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(payload) if payload.startswith(b"{") else payload


def binary_request() -> tuple[bytes, bytes]:
    """(JSON header, whole body) of a request whose input 'x' [1, 2] travels binary."""
    tensor = {"name": "x", "datatype": "FP32", "shape": [1, 2]}
    inputs = [tensor | {"parameters": {"binary_data_size": 8}}]
    inputs += [
        {"name": "n", "datatype": "UINT8", "shape": [1, 2], "data": [1, 2]},
        {"name": "t", "datatype": "BYTES", "shape": [1, 1], "data": ["a"]},
    ]
    head = json.dumps({"inputs": inputs, "outputs": [{"name": "x_out"}]}).encode()
    return head, head + struct.pack("<2f", 1.5, -2.0)


def test_the_right_length_once_is_answered(server: RunningServer) -> None:
    head, body = binary_request()
    status, answer = send(server, PATH, body, [(HEADER, str(len(head)))])
    assert status == 200, answer
    assert answer["outputs"][0]["data"] == [1.5, -2.0]


@pytest.mark.parametrize("order", ["right-first", "wrong-first", "equal"])
def test_the_header_twice_is_refused_in_any_order(server: RunningServer, order: str) -> None:
    head, body = binary_request()
    values = {
        "right-first": [str(len(head)), "7"],
        "wrong-first": ["7", str(len(head))],
        "equal": [str(len(head))] * 2,
    }[order]
    status, answer = send(server, PATH, body, [(HEADER, value) for value in values])
    assert status == 400, answer
    sent = ", ".join(repr(value) for value in values)
    assert f"{HEADER} is sent 2 times ({sent}) for a body of {len(body)} bytes" in answer["error"]


@pytest.mark.parametrize("delta", [-5, 3], ids=["cuts", "overruns"])
def test_a_length_that_cuts_or_overruns_the_json_names_header_value_and_body(
    server: RunningServer, delta: int
) -> None:
    head, body = binary_request()
    value = len(head) + delta
    status, answer = send(server, PATH, body, [(HEADER, str(value))])
    assert status == 400, answer
    assert (
        f"the first {value} bytes of the body ({HEADER}: {value}, body {len(body)} bytes)"
        in (answer["error"])
    )


@pytest.mark.parametrize("value", ["12, 40", "+40", "4e1", ""])
def test_a_value_that_is_not_one_byte_count_is_refused(server: RunningServer, value: str) -> None:
    _, body = binary_request()
    status, answer = send(server, PATH, body, [(HEADER, value)])
    assert status == 400, answer
    assert f"Unable to parse {HEADER}, got: {value!r} (body {len(body)} bytes)" in answer["error"]


@pytest.mark.parametrize(
    "path",
    [
        "/v2/models/mistakes/generate",
        "/v2/models/mistakes/generate_stream",
        "/v2/models/mistakes/versions/1/generate",
        "/v2/repository/index",
        "/v2/systemsharedmemory/region/r/register",
    ],
)
def test_endpoints_without_a_binary_part_refuse_the_header(
    server: RunningServer, path: str
) -> None:
    body = json.dumps({"text_input": "hello"}).encode()
    status, answer = send(server, path, body, [(HEADER, "5")])
    assert status == 400, answer
    assert answer["error"] == (
        f"{HEADER} '5' (body {len(body)} bytes) is for the binary tensor data of /infer; "
        f"POST {path} takes no binary part: drop the header"
    )
