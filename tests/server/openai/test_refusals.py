"""Client mistakes on ``/v1/chat/completions`` get a 4xx with OpenAI's error body
(``error.message``, ``type``, ``param`` at the element, ``code``), never a 5xx (the openai
SDK retries 5xx): undecodable pictures (C35), too many pictures (C36), ``n`` out of range
(C38), malformed messages (C39, and the conversations accepted by the documented rule),
huge bodies and pictures (C40), unknown and unserved fields; after each the server still
answers."""

from __future__ import annotations

import io
import json
import socket
import zlib

import pytest
from PIL import Image

from server.http.helpers import curl

from .conftest import KEY, data_url, user

pytestmark = pytest.mark.slow


def png(size: tuple[int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, (20, 40, 60)).save(buffer, format="PNG")
    return buffer.getvalue()


def declaring(width: int, height: int) -> bytes:
    """A 50 KB PNG whose header declares ``width`` x ``height`` (its data is a small
    picture's): a decompression bomb's shape."""
    data = bytearray(png((28, 28)))
    data[16:24] = width.to_bytes(4, "big") + height.to_bytes(4, "big")
    data[29:33] = zlib.crc32(bytes(data[12:29])).to_bytes(4, "big")
    return bytes(data) + b"\0" * 50_000


def refused(served, body, status=400, param=None, match="") -> dict:
    code, answer = served.chat(body)
    assert code == status, answer
    error = answer["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == param, error
    assert match in error["message"], error
    return error


def still_answers(served) -> None:
    code, answer = served.chat({"model": "qwen-vl", "messages": user("Hi"), "max_tokens": 2})
    assert code == 200 and answer["usage"]["completion_tokens"] == 2, answer


@pytest.mark.parametrize(
    ("name", "url", "match"),
    [
        ("truncated PNG", data_url(png((64, 64))[:60], "image/png"), "cannot decode this PNG"),
        ("@@@", "data:image/png;base64,@@@", "valid base64"),
        ("hello", data_url(b"hello", "image/png"), "declares image/png but its bytes are not"),
        ("JPEG as GIF", None, "declares image/gif but its bytes are not"),
        ("private URL", "http://10.9.9.9/x.png", "a loopback, private, link-local or reserved"),
        ("upper-case scheme", "HTTP://10.9.9.9/x.png", "a loopback, private, link-local or"),
        ("unserved scheme", "ftp://example.com/x.png", "a data: URL (data:image/png;base64"),
        ("not a picture type", data_url(b"hello", "text/plain"), "'text/plain' are not accepted"),
    ],
)
def test_undecodable_pictures_point_at_the_part(served, pictures, name, url, match) -> None:
    """C35: 400 with param at the image part; the next good request answers."""
    url = url or data_url(pictures["rocket.jpg"], "image/gif")
    parts = [{"type": "text", "text": "Hi"}, {"type": "image_url", "image_url": {"url": url}}]
    body = {"model": "qwen-vl", "messages": [{"role": "user", "content": parts}]}
    error = refused(served, body, 400, "messages[0].content[1].image_url.url", match)
    assert "aGVsbG8" not in error["message"] and "hello" not in error["message"]
    still_answers(served)


def test_more_pictures_than_the_limit_are_refused_naming_it(served) -> None:
    """C36: the vision profile takes 8 pictures per request (models/qwen-vl/model.yaml)."""
    body = {"model": "qwen-vl", "messages": user("Hi", *[png((28, 28))] * 9, mime="image/png")}
    refused(served, body, 400, "messages", "allowed 0..8")


def test_n_out_of_range_is_refused_naming_it(served) -> None:
    """C38: n is served from 1 to 16; other values are refused, never one silent choice."""
    for stream in (False, True):
        for n in (0, 17, -1):
            body = {"model": "qwen-vl", "messages": user("Hi"), "n": n, "stream": stream}
            refused(served, body, 400, "n", "1 <= n <= 16")


@pytest.mark.parametrize(
    ("messages", "param"),
    [
        ([], "messages"),
        ([{"role": "robot", "content": "Hi"}], "messages[0].role"),
        ([{"role": 0, "content": "Hi"}], "messages[0].role"),
        ([{"role": "user", "content": None}], "messages[0].content"),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}],
         "messages[0].content[0].image_url.url"),
        ([{"role": "user", "content": [{"type": "text", "text": 0}]}],
         "messages[0].content[0].text"),
        ([{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}],
         "messages[0].content[0].type"),
        ([{"role": "tool", "content": "42", "tool_call_id": "x"}], "messages[0].role"),
        ([{"role": "user", "content": "a"}, {"role": "assistant", "content": None,
          "tool_calls": [{"id": "c", "type": "function"}]}], "messages[1].tool_calls"),
        ([{"role": "user", "content": "a"}, {"role": "function", "content": "b", "name": "f"}],
         "messages[1].role"),
        ([{"role": "system", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
         "messages[0].content[0].type"),
        ([{"role": "user", "content": "a", "audio": {"id": "x"}}], "messages[0].audio"),
        ([{"role": "user", "content": "a", "colour": "red"}], "messages[0].colour"),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": {
            "url": "http://127.0.0.1/x.png", "detail": "ultra"}}]}],
         "messages[0].content[0].image_url.detail"),
        ([{"role": "user", "content": "look <|image_pad|> here"}], "messages[0]"),
        ("Hi", "messages"),
    ],
)  # fmt: skip
def test_malformed_messages_point_at_the_element(served, messages, param) -> None:
    """C39."""
    refused(served, {"model": "qwen-vl", "messages": messages}, 400, param)


def test_conversations_the_template_takes_are_accepted(served) -> None:
    """C39's documented rule: any order of system, developer (= system), user and assistant
    turns, two assistant turns in a row too, a system message after others, a conversation
    ending on an assistant turn; the answer is a new assistant turn. The SDK's echo of an
    earlier answer (refusal, tool_calls null) is accepted, ``name`` ignored."""
    conversations = [
        [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
         {"role": "assistant", "content": "c"}],
        [{"role": "developer", "content": "Be terse."}, {"role": "user", "content": "Hi",
                                                         "name": "ann"}],
        [{"role": "user", "content": "a"}, {"role": "system", "content": "b"},
         {"role": "assistant", "content": [{"type": "text", "text": "c"}], "refusal": None,
          "tool_calls": None, "function_call": None, "audio": None, "annotations": []}],
        [{"role": "system", "content": "Only a system prompt."}],
    ]  # fmt: skip
    for messages in conversations:
        code, answer = served.chat({"model": "qwen-vl", "messages": messages, "max_tokens": 2})
        assert code == 200, answer


@pytest.mark.parametrize(
    ("field", "value"),
    [("response_format", {"type": "json_object"}), ("top_logprobs", 3),
     ("response_format", {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}),
     ("tools", [{"type": "function", "function": {"name": "f"}}]), ("temprature", 0.5),
     ("max_tokens", "3"), ("seed", 2**40), ("stop", ["a", "b", "c", "d", "e"]),
     ("logprobs", 1), ("n", 1.5)],
)  # fmt: skip
def test_unserved_and_unknown_fields_are_refused_naming_them(served, field, value) -> None:
    refused(served, {"model": "qwen-vl", "messages": user("Hi"), field: value}, 400, field)


def test_runtime_ranges_are_refused_naming_the_field(served) -> None:
    """The runtime's range checks, with param at the field the client sent."""
    body = {"model": "qwen-vl", "messages": user("Hi")}
    refused(served, {**body, "temperature": -1}, 400, "temperature", "out of range")
    refused(served, {**body, "max_completion_tokens": 0}, 400, "max_completion_tokens")
    refused(served, {**body, "max_tokens": 10**6}, 400, "max_tokens", "context limit")
    refused(served, {**body, "presence_penalty": 2.5}, 400, "presence_penalty", "-2 <= value")
    refused(served, {**body, "frequency_penalty": -3}, 400, "frequency_penalty", "out of range")
    refused(served, {**body, "logprobs": True, "top_logprobs": 21}, 400, "top_logprobs",
            "0 <= top_logprobs <= 20")  # fmt: skip


def test_ignored_fields_are_accepted(served) -> None:
    body = {"model": "qwen-vl", "messages": user("Hi"), "max_tokens": 1, "user": "u-1",
            "metadata": {"a": "b"}, "store": False, "n": 1, "logprobs": False,
            "tool_choice": "none", "parallel_tool_calls": False}  # fmt: skip
    code, answer = served.chat(body)
    assert code == 200, answer


def test_an_unknown_model_is_404(served) -> None:
    error = refused(served, {"model": "gpt-4o", "messages": user("Hi")}, 404, None, "gpt-4o")
    assert error["code"] == "model_not_found"


def test_huge_bodies_and_pictures(served, tmp_path) -> None:
    """C40: a body over the message limit (an 80 MB data URL) is 413 while reading it
    (curl); a PNG declaring 30000x30000 and a 4000x10 picture are 400; a body longer than
    its Content-Length is a 4xx; the server answers after each."""
    huge = {"model": "qwen-vl", "messages": user("Hi", b"\xff\xd8\xff" + b"\0" * 60_000_000)}
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(huge))
    done = curl("-s", "-o", "-", "-w", "\n%{http_code}", "-H", f"Authorization: Bearer {KEY}",
                "-H", "Content-Type: application/json", "--data-binary", f"@{path}",
                f"{served.base_url}/chat/completions")  # fmt: skip
    text, _, status = done.stdout.rpartition("\n")
    assert status == "413", done.stdout[-500:]
    assert "over the server's limit" in json.loads(text)["error"]["message"]
    bomb = declaring(30000, 30000)
    refused(served, {"model": "qwen-vl", "messages": user("Hi", bomb, mime="image/png")}, 400,
            "messages[0].content[0].image_url.url", "pixel budget")  # fmt: skip
    wide = {"model": "qwen-vl", "messages": user("Hi", png((4000, 10)), mime="image/png")}
    refused(served, wide, 400, "messages[0].content[0].image_url.url", "aspect ratio")
    with socket.create_connection(("127.0.0.1", served.http_port), timeout=30) as sock:
        body = b'{"model": "qwen-vl"' + b" " * 1_000_000 + b"}"
        head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                f"{KEY}\r\nContent-Length: 10\r\n\r\n").encode()  # fmt: skip
        sock.sendall(head + body[:200_000])
        status = sock.recv(200).split(b" ")[1]
    assert status.startswith(b"4"), status
    still_answers(served)


def test_pictures_over_the_decode_bound_are_refused_naming_it(served) -> None:
    """6000x6000 = 36 MP is inside the pixel budget (64 MP) but takes 288 MB decoded, over
    the served bound of 256 MiB: refused before decoding, naming the setting."""
    big = {"model": "qwen-vl", "messages": user("Hi", declaring(6000, 6000), mime="image/png")}
    refused(served, big, 400, "messages", "MMAAS_MAX_DECODE_BYTES")
    still_answers(served)
