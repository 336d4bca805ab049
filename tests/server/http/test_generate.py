"""Triton's generate extension over the real HTTP front end with a test-only generating
model (:mod:`.generating`): ``/generate`` joins, ``/generate_stream`` sends one SSE
``data:`` event per word with one documented final event, an engine error after the first
token is one error event then the end, a client that leaves after 3 events stops the
generation within a step, and a request invalid from the start is a plain 400 (C25)."""

from __future__ import annotations

import base64
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..conftest import free_port

TESTS = Path(__file__).resolve().parents[2]


class Generating:
    def __init__(self, process: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.process, self.port, self.log = process, port, log

    def post(self, path: str, body: object) -> http.client.HTTPResponse:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        connection.request("POST", path, body=data, headers={"Content-Type": "application/json"})
        return connection.getresponse()

    def stderr(self) -> str:
        return self.log.read_text()


@pytest.fixture(scope="module")
def echo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Generating]:
    port = free_port()
    log = tmp_path_factory.mktemp("generating") / "server.log"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    with log.open("wb") as stream:
        process = subprocess.Popen(
            [sys.executable, "-m", "server.http.generating", str(port)], env=env, stderr=stream
        )
    deadline = time.monotonic() + 60
    while "listening" not in log.read_text():
        assert process.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    yield Generating(process, port, log)
    process.send_signal(signal.SIGTERM)
    process.wait(30)


def events(reply: http.client.HTTPResponse) -> list[dict]:
    """Every SSE event: each must be ``data: <JSON>`` followed by a blank line."""
    body = reply.read().decode()
    assert body.endswith("\n\n"), body
    chunks = body[:-2].split("\n\n")
    assert all(chunk.startswith("data: ") and "\n" not in chunk for chunk in chunks), body
    return [json.loads(chunk[len("data: ") :]) for chunk in chunks]


def test_generate_joins_the_answer(echo: Generating) -> None:
    reply = echo.post("/v2/models/echo/generate", {"id": "g1", "text_input": "a b c"})
    assert reply.status == 200 and reply.getheader("content-type") == "application/json"
    assert json.loads(reply.read()) == {
        "model_name": "echo",
        "model_version": "1",
        "id": "g1",
        "text_output": "a b c",
    }
    capped = echo.post(
        "/v2/models/echo/versions/1/generate",
        {"text_input": "a b c", "parameters": {"max_tokens": 2}},
    )
    assert json.loads(capped.read())["text_output"] == "a b"


def test_a_picture_as_a_base64_data_url_reaches_the_model_as_bytes(echo: Generating) -> None:
    picture = b"\x89PNG\r\n\x1a\n\x00\xff"
    url = "data:image/png;base64," + base64.b64encode(picture).decode()
    reply = echo.post("/v2/models/echo/generate", {"text_input": "seen", "image": [url]})
    assert json.loads(reply.read())["text_output"] == "<10-bytes> seen"
    upper = "DATA:image/png;BASE64," + base64.b64encode(picture).decode()  # RFC 3986 3.1
    reply = echo.post("/v2/models/echo/generate", {"text_input": "seen", "image": [upper]})
    assert json.loads(reply.read())["text_output"] == "<10-bytes> seen"
    broken = echo.post(
        "/v2/models/echo/generate", {"text_input": "x", "image": ["data:image/png;base64,%%%"]}
    )
    assert broken.status == 400
    assert "does not hold valid base64" in json.loads(broken.read())["error"]


def test_generate_stream_one_event_per_word_and_one_final(echo: Generating) -> None:
    reply = echo.post(
        "/v2/models/echo/generate_stream", {"id": "s1", "text_input": "one two three"}
    )
    assert reply.status == 200
    assert reply.getheader("content-type").startswith("text/event-stream")
    got = events(reply)
    assert [e["text_output"] for e in got] == ["one", "two", "three"]
    assert [e["final"] for e in got] == [False, False, True]
    assert {e["id"] for e in got} == {"s1"} and {e["model_name"] for e in got} == {"echo"}


def test_an_error_after_the_first_token_is_one_error_event_then_the_end(echo: Generating) -> None:
    reply = echo.post("/v2/models/echo/generate_stream", {"text_input": "FAIL at two"})
    assert reply.status == 200
    got = events(reply)
    assert got[0]["text_output"] == "FAIL" and got[0]["final"] is False
    assert got[1] == {
        "error": "the engine failed on this request: the language engine failed at step 2",
        "final": True,
    }
    assert len(got) == 2


@pytest.mark.parametrize(
    ("path", "body", "status", "message"),
    [
        ("/v2/models/echo/generate_stream", b"{nope", 400, "not valid JSON"),
        ("/v2/models/echo/generate_stream", {"text_inptu": "x"}, 400, "unknown input 'text_inptu'"),
        ("/v2/models/echo/generate_stream", {"max_tokens": 2}, 400, "missing input 'text_input'"),
        (
            "/v2/models/echo/generate_stream",
            {"text_input": "x", "max_tokens": "two"},
            400,
            "INT32 takes integers",
        ),
        ("/v2/models/echo/generate", {"text_input": 5}, 400, "BYTES takes strings"),
        ("/v2/models/nope/generate_stream", {"text_input": "x"}, 404, "'nope'"),
    ],
)
def test_a_request_invalid_from_the_start_is_a_plain_error(
    echo: Generating, path, body, status, message
) -> None:
    reply = echo.post(path, body)
    assert reply.status == status and reply.getheader("content-type") == "application/json"
    assert message in json.loads(reply.read())["error"]


def test_a_client_that_leaves_after_3_events_stops_the_generation(echo: Generating) -> None:
    words = " ".join(f"w{i}" for i in range(200))  # 10 s of words at 50 ms each
    closed_before = closings(echo)
    connection = http.client.HTTPConnection("127.0.0.1", echo.port, timeout=30)
    connection.request(
        "POST", "/v2/models/echo/generate_stream", body=json.dumps({"text_input": words})
    )
    reply = connection.getresponse()
    seen = 0
    while seen < 3:
        seen += reply.fp.readline().startswith(b"data: ")
    connection.close()
    deadline = time.monotonic() + 5
    while len(closings(echo)) == len(closed_before) and time.monotonic() < deadline:
        time.sleep(0.05)
    closed = closings(echo)[len(closed_before) :]
    assert closed and closed[0] <= 5, echo.stderr()  # stopped within a step or two


def closings(echo: Generating) -> list[int]:
    """Words sent by each generation that has ended, from the model's log lines."""
    lines = echo.stderr().splitlines()
    return [int(line.split()[2]) for line in lines if line.startswith("closed after")]


def test_curl_streams_the_events(echo: Generating) -> None:
    curl = shutil.which("curl")
    assert curl, "curl is not installed"
    answer = subprocess.run(
        [
            curl,
            "-sS",
            "-N",
            "-d",
            '{"text_input": "x y"}',
            f"http://127.0.0.1:{echo.port}/v2/models/echo/generate_stream",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert answer.stdout.count("data: ") == 2 and '"final":true' in answer.stdout
