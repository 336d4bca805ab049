"""Reading the Triton LLM inputs: absent optional inputs take the documented defaults, scalars
become Python numbers, and malformed values are refused naming the input; the ``messages``
conversation (or ``text_input`` as one user turn), each malformed message refused naming
its element. (A JSON client's base64 data URL is decoded to the picture's bytes by HTTP
generate, before the pipeline.)"""

from __future__ import annotations

import json

import numpy as np
import pytest

from mmaas.core.errors import InputError
from mmaas.pipelines.qwen2_vl.runtime.request import read_request, token_outputs


def text(value: bytes = b"Hi") -> dict[str, np.ndarray]:
    return {"text_input": np.array([value], dtype=object)}


def test_absent_inputs_take_the_defaults() -> None:
    request = read_request(text())
    assert (request.text, request.images, request.max_tokens) == ("Hi", (), None)
    assert (request.temperature, request.top_p, request.top_k, request.seed) == (0.0, 1.0, 0, None)
    assert request.sampling(default_max_tokens=7).max_tokens == 7


def test_scalars_are_read_as_python_numbers() -> None:
    inputs = {**text(), "seed": np.array([5], np.int32), "top_p": np.array([0.5], np.float32)}
    request = read_request(inputs)
    assert request.seed == 5 and type(request.seed) is int and request.top_p == 0.5


def test_text_that_is_not_utf8_is_refused() -> None:
    with pytest.raises(InputError, match=r"'text_input': not UTF-8 text \(invalid start byte"):
        read_request(text(b"\xff"))


def test_outputs_follow_the_interface_datatypes() -> None:
    outputs = token_outputs("é", [1, 2], "length", 9)
    assert outputs["text_output"].tolist() == ["é".encode()]
    assert outputs["output_ids"].dtype == np.int32
    assert outputs["finish_reason"].tolist() == [b"length"]
    assert outputs["num_input_tokens"].tolist() == [9]
    assert token_outputs("", [3], None, 9)["finish_reason"].tolist() == [b""]


def test_stop_strings_are_read_and_an_empty_one_is_refused() -> None:
    stops = np.array([b"\n\n", "é".encode()], dtype=object)
    assert read_request({**text(), "stop": stops}).stop == ("\n\n", "é")
    with pytest.raises(InputError, match="input 'stop' element 1: an empty stop string"):
        read_request({**text(), "stop": np.array([b"x", b""], dtype=object)})
    with pytest.raises(InputError, match="input 'stop' element 0: not UTF-8"):
        read_request({**text(), "stop": np.array([b"\xff"], dtype=object)})


def messages(value: object) -> dict[str, np.ndarray]:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return {"messages": np.array([raw], dtype=object)}


def test_text_input_is_one_user_turn_after_its_pictures() -> None:
    request = read_request({**text(), "image": np.array([b"a", b"b"], dtype=object)})
    assert request.conversation.turns == (("user", (None, None, "Hi")),)
    assert request.conversation.source == "text_input"


def test_messages_are_read_in_order() -> None:
    document = [
        {"role": "system", "content": "Terse."},
        {"role": "user", "content": [{"type": "text", "text": "A"}, {"type": "image"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "B"}]},
    ]
    request = read_request({**messages(document), "max_tokens": np.array([3], np.int32)})
    assert request.conversation.turns == (
        ("system", ("Terse.",)), ("user", ("A", None)), ("assistant", ("B",)),
    )  # fmt: skip
    assert request.conversation.source == "messages" and request.conversation.images == 1
    assert request.max_tokens == 3


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (b"\xff", r"input 'messages': not UTF-8 JSON"),
        (b"{not json", r"input 'messages': not UTF-8 JSON"),
        ([], "input 'messages': must be a non-empty JSON list"),
        ({"role": "user"}, "input 'messages': must be a non-empty JSON list"),
        ([1], r"'messages': messages\[0\]: must be an object with role and content"),
        ([{"role": 0, "content": "x"}], r"messages\[0\].role: must be a string, got 0"),
        ([{"role": "user", "content": None}], r"messages\[0\].content: must be a string or"),
        ([{"role": "user", "content": "x", "name": "a"}], r"messages\[0\].name: unknown key"),
        ([{"role": "user", "content": [{"type": "text", "text": 0}]}],
         r"messages\[0\].content\[0\]: must be \{\"type\": \"text\""),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": "x"}]}],
         r"messages\[0\].content\[0\]: must be"),
        ([{"role": "user", "content": [{"type": "image", "image": "x"}]}],
         r"messages\[0\].content\[0\]: must be"),
        (b"[" * 100_000 + b"]" * 100_000, "input 'messages': JSON nested too deeply"),
        ([{"role": "user", "content": "a\ud800"}],
         r"messages\[0\].content: contains a lone UTF-16 surrogate \(U\+D800\) at character 1"),
        ([{"role": "user", "content": [{"type": "text", "text": "\udfff"}]}],
         r"messages\[0\].content\[0\].text: contains a lone UTF-16 surrogate \(U\+DFFF\)"),
        ([{"role": "us\udc00er", "content": "x"}], r"messages\[0\].role: contains a lone"),
        ([{"x\ud800": 1}], r"messages\[0\]: a key: contains a lone"),
    ],
)  # fmt: skip
def test_malformed_messages_are_refused_naming_the_element(document, message: str) -> None:
    with pytest.raises(InputError, match=message):
        read_request(messages(document))


def test_text_that_is_not_unicode_is_refused_naming_the_input() -> None:
    """A str element (the HTTP routes' decoded JSON) with a lone surrogate, and its bytes
    (gRPC), which UTF-8 cannot hold."""
    for value in ("a\ud800", "a\ud800".encode("utf-8", "surrogatepass")):
        with pytest.raises(InputError, match=r"input 'text_input': (contains a lone|not UTF-8)"):
            read_request({"text_input": np.array([value], dtype=object)})
        stop = {**text(), "stop": np.array(["ok", value], dtype=object)}
        with pytest.raises(InputError, match=r"input 'stop' element 1: (contains a lone|not UTF)"):
            read_request(stop)


def test_one_of_text_input_and_messages() -> None:
    both = {**text(), **messages([{"role": "user", "content": "x"}])}
    for inputs in (both, {}):
        with pytest.raises(InputError, match="text_input or the conversation as messages"):
            read_request(inputs)


def test_penalties_and_logprobs_are_read() -> None:
    inputs = {**text(), "presence_penalty": np.array([0.5], np.float32),
              "frequency_penalty": np.array([-1.0], np.float32),
              "logprobs": np.array([3], np.int32)}  # fmt: skip
    params = read_request(inputs).sampling(5)
    assert (params.presence_penalty, params.frequency_penalty, params.logprobs) == (0.5, -1.0, 3)
    assert read_request(text()).sampling(5).logprobs is None
