"""``POST /v1/chat/completions`` against ``mmaas serve models/qwen-vl`` with a plain HTTP
client: the answer equals the KServe generate endpoint's for the same greedy request; the
streamed chunks are OpenAI's (role first, content deltas, one finish_reason, the usage
chunk with ``choices: []``, ``[DONE]``); stop strings (C37); usage counts the pictures'
tokens as transformers' processor does (C36, C41); the API key; /v1/models."""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image

from .conftest import KEY, data_url, events, user

pytestmark = pytest.mark.slow
QUESTION = "Describe this picture."


def generate(served, text: str, pictures, **params) -> dict:
    """The KServe generate endpoint's answer to the same request."""
    body = {"text_input": text, "image": [data_url(p) for p in pictures], **params}
    status, answer = served.request("POST", "/v2/models/qwen-vl/generate", body)
    assert status == 200, answer
    return answer


def test_the_chat_answer_equals_generate_token_for_token(served, pictures) -> None:
    rocket = pictures["rocket.jpg"]
    status, chat = served.chat({"model": "qwen-vl", "messages": user(QUESTION, rocket),
                                "max_tokens": 20, "temperature": 0})  # fmt: skip
    assert status == 200, chat
    direct = generate(served, QUESTION, [rocket], max_tokens=20)
    choice = chat["choices"][0]
    assert chat["object"] == "chat.completion" and chat["model"] == "qwen-vl"
    assert choice["message"] == {"role": "assistant", "content": direct["text_output"]}
    assert choice["finish_reason"] == direct["finish_reason"] == "length"
    assert chat["usage"]["completion_tokens"] == len(direct["output_ids"]) == 20
    assert chat["usage"]["prompt_tokens"] == direct["num_input_tokens"]
    assert chat["usage"]["total_tokens"] == chat["usage"]["prompt_tokens"] + 20


def test_the_stream_is_openais_and_joins_to_the_unary_answer(served, pictures) -> None:
    body = {"model": "qwen-vl", "messages": user(QUESTION, pictures["grace_hopper.jpg"]),
            "max_completion_tokens": 16, "stream": True,
            "stream_options": {"include_usage": True}}  # fmt: skip
    status, stream = served.chat(body)
    assert status == 200, stream
    chunks = events(stream)
    assert chunks[-1] == "[DONE]"
    usage, content = chunks[-2], chunks[:-2]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 16
    assert content[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    reasons = [c["choices"][0]["finish_reason"] for c in content]
    assert reasons == [None] * (len(content) - 1) + ["length"]
    assert all(c["usage"] is None and c["object"] == "chat.completion.chunk" for c in content)
    assert len({c["id"] for c in chunks[:-1]}) == 1
    joined = "".join(c["choices"][0]["delta"].get("content", "") for c in content)
    status, unary = served.chat({**body, "stream": False, "stream_options": None})
    assert joined == unary["choices"][0]["message"]["content"]


def test_a_stop_string_is_never_streamed(served, pictures) -> None:
    """C37: a stop string that spans two tokens, from the middle of the greedy answer."""
    messages = user(QUESTION, pictures["rocket.jpg"])
    _, plain = served.chat({"model": "qwen-vl", "messages": messages, "max_tokens": 30})
    text = plain["choices"][0]["message"]["content"]
    stop = text[len(text) // 2 : len(text) // 2 + 3]
    body = {"model": "qwen-vl", "messages": messages, "max_tokens": 30, "stop": [stop, "zzzz"]}
    _, unary = served.chat(body)
    _, stream = served.chat({**body, "stream": True})
    chunks = [c for c in events(stream) if c != "[DONE]"]
    joined = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert joined == unary["choices"][0]["message"]["content"] == text[: text.index(stop)]
    assert unary["choices"][0]["finish_reason"] == chunks[-1]["choices"][0]["finish_reason"]
    assert unary["choices"][0]["finish_reason"] == "stop"


def test_usage_counts_each_pictures_tokens_as_the_processor_does(
    served, pictures, reference
) -> None:
    """C36/C41: two pictures keep their order; prompt_tokens equals transformers'
    processor's input_ids length (after load_image) for each request."""
    a, b = pictures["grace_hopper.jpg"], pictures["rocket.jpg"]
    counts = {}
    for name, pics in {"none": [], "a": [a], "b": [b], "ab": [a, b], "ba": [b, a]}.items():
        status, chat = served.chat({"model": "qwen-vl", "messages": user("Hi", *pics),
                                    "max_tokens": 1})  # fmt: skip
        assert status == 200, chat
        counts[name] = chat["usage"]["prompt_tokens"]
        images = [Image.open(io.BytesIO(p)) for p in pics]
        assert counts[name] == len(reference.inputs(images, "Hi")["input_ids"][0]), name
    assert counts["ab"] - counts["none"] == (counts["a"] - counts["none"]) + (
        counts["b"] - counts["none"]
    )
    ab = generate(served, "Which comes first?", [a, b], max_tokens=8)["output_ids"]
    ba = generate(served, "Which comes first?", [b, a], max_tokens=8)["output_ids"]
    assert ab != ba  # the order reaches the model


def test_the_api_key_is_asked(served) -> None:
    for key in (None, "sk-wrong"):
        status, body = served.request("GET", "/v1/models", key=key)
        assert status == 401 and body["error"]["code"] == "invalid_api_key"
    status, body = served.request("GET", "/v1/models")
    assert status == 200 and [m["id"] for m in body["data"]] == ["qwen-vl"]
    status, body = served.request("GET", "/v1/models/qwen-vl")
    assert status == 200 and body["object"] == "model"
    status, body = served.request("GET", "/v1/models/qwen-vl-vision")  # not a generator
    assert status == 404 and body["error"]["code"] == "model_not_found"
    assert KEY not in json.dumps(body)
