"""Text that cannot be a prompt is the client's mistake on every route of ``mmaas serve
models/qwen-vl``: a ``messages`` JSON nested deeper than the decoder takes and strings that
are not Unicode (a lone UTF-16 surrogate, which a JSON ``\\ud800`` escape spells) get 400 /
INVALID_ARGUMENT naming the input, one log line without a traceback, and the server still
answers."""

from __future__ import annotations

import json
import queue
import re

import numpy as np
import pytest
import tritonclient.grpc as triton
from tritonclient.utils import InferenceServerException

pytestmark = pytest.mark.slow
GENERATE = "/v2/models/qwen-vl/generate"
DEEP = "[" * 1000 + "]" * 1000
LONE = '[{"role": "user", "content": "\\ud800"}]'  # the JSON text holds the escape
LONE_PART = '[{"role": "user", "content": [{"type": "text", "text": "a\\udc00"}]}]'
SURROGATE = "lone UTF-16 surrogate"


def messages_input(text: str) -> list[triton.InferInput]:
    """``messages`` BYTES [1] and ``max_tokens`` INT32 [1] = 2."""
    messages = triton.InferInput("messages", [1], "BYTES")
    messages.set_data_from_numpy(np.array([text.encode()], dtype=object))
    tokens = triton.InferInput("max_tokens", [1], "INT32")
    tokens.set_data_from_numpy(np.array([2], dtype=np.int32))
    return [messages, tokens]


def streamed_error(url: str, inputs: list[triton.InferInput]) -> str:
    """The error message ModelStreamInfer answers ``inputs`` with."""
    events: queue.Queue = queue.Queue()
    client = triton.InferenceServerClient(url)
    client.start_stream(callback=lambda result, error: events.put(error))
    try:
        client.async_stream_infer("qwen-vl", inputs)
        error = events.get(timeout=60)
    finally:
        client.stop_stream(cancel_requests=True)
        client.close()
    assert error is not None, "the stream answered"
    return str(error.message())


@pytest.mark.parametrize(
    ("text", "match"),
    [(DEEP, "input 'messages': JSON nested too deeply"),
     (LONE, rf"input 'messages': messages\[0\].content: contains a {SURROGATE} \(U\+D800\)"),
     (LONE_PART, rf"messages\[0\].content\[0\].text: contains a {SURROGATE} \(U\+DC00\)")],
)  # fmt: skip
def test_kserve_routes_refuse_it_as_invalid_argument(served, text, match) -> None:
    logged = served.log.stat().st_size
    status, answer = served.request("POST", GENERATE, {"messages": text, "max_tokens": 2})
    assert status == 400, answer
    assert re.search(match, answer["error"]), answer
    status, answer = served.request(
        "POST", "/v2/models/qwen-vl/generate_stream", {"messages": text, "max_tokens": 2}
    )
    assert status == 400, answer
    url = f"127.0.0.1:{served.grpc_port}"
    grpc = triton.InferenceServerClient(url)
    with pytest.raises(InferenceServerException, match=match) as refused:
        grpc.infer("qwen-vl", messages_input(text))
    grpc.close()
    assert refused.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert re.search(match, streamed_error(url, messages_input(text)))
    log = served.log.read_bytes()[logged:].decode(errors="replace")
    assert "Traceback" not in log and "engine failed" not in log, log[-3000:]
    status, answer = served.request("POST", GENERATE, {"text_input": "Hi", "max_tokens": 2})
    assert status == 200, answer


def test_text_input_and_stop_strings_are_checked_too(served) -> None:
    """HTTP's JSON parser refuses a lone surrogate in the body itself; the KServe infer
    route's JSON ``data`` and gRPC's UTF-8 bytes cannot carry one decoded: each is a 400."""
    body = b'{"text_input": "a\\ud800", "max_tokens": 2}'
    status, answer = served.request("POST", GENERATE, raw=body)
    assert status == 400, answer
    body = b'{"text_input": "Hi", "stop": ["\\udc00"], "max_tokens": 2}'
    status, answer = served.request("POST", GENERATE, raw=body)
    assert status == 400, answer
    text = triton.InferInput("text_input", [1], "BYTES")
    text.set_data_from_numpy(np.array([b"a\xed\xa0\x80"], dtype=object))  # U+D800 as bytes
    grpc = triton.InferenceServerClient(f"127.0.0.1:{served.grpc_port}")
    with pytest.raises(InferenceServerException, match="input 'text_input': not UTF-8") as refused:
        grpc.infer("qwen-vl", [text])
    grpc.close()
    assert refused.value.status() == "StatusCode.INVALID_ARGUMENT"


def test_the_openai_route_refuses_it_as_a_400(served) -> None:
    message = '{"role": "user", "content": "a\\ud800"}'
    body = ('{"model": "qwen-vl", "max_tokens": 2, "messages": [' + message + "]}").encode()
    status, answer = served.request("POST", "/v1/chat/completions", raw=body)
    assert status == 400, answer
    assert answer["error"]["type"] == "invalid_request_error", answer
    deep = ('{"model": "qwen-vl", "max_tokens": 2, "messages": ' + DEEP + "}").encode()
    status, answer = served.request("POST", "/v1/chat/completions", raw=deep)
    assert status == 400, answer
    nested = json.dumps({"model": "qwen-vl", "max_tokens": 2,
                         "messages": [{"role": "user", "content": [[[[["x"]]]]]}]})  # fmt: skip
    status, answer = served.request("POST", "/v1/chat/completions", raw=nested.encode())
    assert status == 400, answer
