"""The chat features against ``mmaas serve models/qwen-vl``, with a plain HTTP client:

* conversations: a system prompt (or a developer one), an earlier assistant turn and
  pictures in two user turns: ``prompt_tokens`` equals transformers' processor's
  ``apply_chat_template`` count, the answer equals the KServe ``generate`` endpoint's with
  the same ``messages`` and equals transformers' greedy ``generate`` token for token;
* pictures fetched from a real local HTTP server give the data URL's answer; a redirect to a
  private address, a slow body and content that is no picture are 400 at the part;
* ``n``: choices 0..n-1, each with the seed ``seed + i`` (choice i = a single request with
  that seed), usage summing them; streamed, each index once with the role first and one
  ``finish_reason``, joined = the unary choice;
* ``logprobs`` with ``top_logprobs``: unary and streamed equal, bytes joining to the text;
* presence and frequency penalties change the answer as the KServe interface's do.
"""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image

from .conftest import data_url, events, user

pytestmark = pytest.mark.slow
NAMES = ("grace_hopper.jpg", "rocket.jpg")


def conversation(first: str, second: str, system_role: str = "system") -> list[dict]:
    """A system prompt, a user turn with a picture, an answer, a user turn with another."""
    return [
        {"role": system_role, "content": "You describe photographs."},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": first}},
                                     {"type": "text", "text": "Who is this?"}]},
        {"role": "assistant", "content": "A woman in a uniform."},
        {"role": "user", "content": [{"type": "text", "text": "And here?"},
                                     {"type": "image_url", "image_url": {"url": second}}]},
    ]  # fmt: skip


def test_a_conversation_is_transformers_prompt_and_answer(served, pictures, reference) -> None:
    urls = [data_url(pictures[n]) for n in NAMES]
    body = {"model": "qwen-vl", "messages": conversation(*urls), "max_tokens": 10}
    status, chat = served.chat(body)
    assert status == 200, chat
    images = iter(Image.open(io.BytesIO(pictures[n])) for n in NAMES)
    hf = []
    for message in conversation("", ""):
        content = message["content"]
        content = [{"type": "text", "text": content}] if isinstance(content, str) else content
        hf.append({"role": message["role"], "content": [
            {"type": "image", "image": next(images)} if p["type"] == "image_url" else p
            for p in content]})  # fmt: skip
    inputs = reference.processor.apply_chat_template(
        hf, add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
    )
    assert chat["usage"]["prompt_tokens"] == inputs["input_ids"].shape[1]
    out = reference.model.generate(**inputs, max_new_tokens=10, do_sample=False)
    new = out[0, inputs["input_ids"].shape[1] :].tolist()
    assert chat["choices"][0]["message"]["content"] == reference.tokenizer.decode(
        new, skip_special_tokens=True
    )
    turns = [{"role": m["role"], "content": m["content"] if isinstance(m["content"], str) else [
        {"type": "image"} if p["type"] == "image_url" else p for p in m["content"]]}
        for m in conversation("", "")]  # fmt: skip
    generate = {"messages": json.dumps(turns), "image": urls, "max_tokens": 10}
    status, direct = served.request("POST", "/v2/models/qwen-vl/generate", generate)
    assert status == 200, direct
    assert direct["output_ids"] == new
    developer = {**body, "messages": conversation(*urls, system_role="developer")}
    assert served.chat(developer)[1]["choices"] == chat["choices"]


def test_pictures_from_urls_equal_data_urls(served, pictures, origin) -> None:
    remote = [f"{origin.url}/files/{n}" for n in NAMES]
    status, fetched = served.chat({"model": "qwen-vl", "messages": conversation(*remote),
                                   "max_tokens": 8})  # fmt: skip
    assert status == 200, fetched
    inline = [data_url(pictures[n]) for n in NAMES]
    _, direct = served.chat({"model": "qwen-vl", "messages": conversation(*inline),
                             "max_tokens": 8})  # fmt: skip
    assert fetched["choices"] == direct["choices"] and fetched["usage"] == direct["usage"]
    param = "messages[3].content[1].image_url.url"
    for path, match in [("/redirect?to=http://192.168.1.1/x.png", "private"),
                        ("/slow", "took over 3 s (MMAAS_FETCH_TIMEOUT_S)"),
                        ("/html", "is not a picture of an accepted format"),
                        ("/missing", "answered HTTP 404")]:  # fmt: skip
        status, answer = served.chat(
            {
                "model": "qwen-vl",
                "max_tokens": 2,
                "messages": conversation(remote[0], origin.url + path),
            }
        )
        assert status == 400, answer
        assert answer["error"]["param"] == param and match in answer["error"]["message"]
        assert "s3cr3t" not in json.dumps(answer)


def test_n_choices_each_with_their_seed(served, pictures) -> None:
    ask = {"model": "qwen-vl", "messages": user("Describe this picture.", pictures[NAMES[1]]),
           "max_tokens": 8, "temperature": 1.0, "seed": 41}  # fmt: skip
    status, answer = served.chat({**ask, "n": 3})
    assert status == 200, answer
    choices = answer["choices"]
    assert [c["index"] for c in choices] == [0, 1, 2]
    for index, choice in enumerate(choices):
        _, alone = served.chat({**ask, "seed": 41 + index})
        assert choice["message"] == alone["choices"][0]["message"]
    assert len({c["message"]["content"] for c in choices}) > 1  # three seeds, three answers
    assert answer["usage"]["completion_tokens"] == 24
    assert answer["usage"]["prompt_tokens"] == alone["usage"]["prompt_tokens"]
    status, stream = served.chat({**ask, "n": 3, "stream": True,
                                  "stream_options": {"include_usage": True}})  # fmt: skip
    chunks = events(stream)
    assert chunks[-1] == "[DONE]" and chunks[-2]["usage"]["completion_tokens"] == 24
    for index, choice in enumerate(choices):
        mine = [c["choices"][0] for c in chunks[:-2] if c["choices"][0]["index"] == index]
        assert mine[0]["delta"] == {"role": "assistant", "content": ""}
        assert [m["finish_reason"] for m in mine].count("length") == 1
        assert mine[-1]["finish_reason"] == "length"
        joined = "".join(m["delta"].get("content", "") for m in mine)
        assert joined == choice["message"]["content"]
    assert all(len(c["choices"]) == 1 for c in chunks[:-2])


def test_logprobs_unary_and_streamed(served, pictures) -> None:
    ask = {"model": "qwen-vl", "messages": user("Describe this picture.", pictures[NAMES[0]]),
           "max_tokens": 12, "logprobs": True, "top_logprobs": 4}  # fmt: skip
    status, answer = served.chat(ask)
    assert status == 200, answer
    choice = answer["choices"][0]
    content = choice["logprobs"]["content"]
    assert len(content) == answer["usage"]["completion_tokens"] == 12
    for entry in content:
        assert set(entry) == {"token", "logprob", "bytes", "top_logprobs"}
        assert len(entry["top_logprobs"]) == 4
        assert entry["top_logprobs"][0]["logprob"] >= entry["logprob"] - 1e-6
    text = b"".join(bytes(e["bytes"]) for e in content).decode(errors="replace")
    assert text == choice["message"]["content"]
    _, stream = served.chat({**ask, "stream": True})
    chunks = [c for c in events(stream) if c != "[DONE]"]
    streamed = [e for c in chunks for e in (c["choices"][0]["logprobs"] or {}).get("content", [])]
    assert streamed == content
    plain = served.chat({**ask, "logprobs": False, "top_logprobs": None})[1]["choices"][0]
    assert plain["logprobs"] is None and plain["message"] == choice["message"]
    none = served.chat({**ask, "top_logprobs": 0})[1]["choices"][0]["logprobs"]["content"]
    assert [e["top_logprobs"] for e in none] == [[]] * 12


def test_penalties_change_the_answer_as_generate_does(served, pictures) -> None:
    picture = pictures[NAMES[0]]
    ask = {"model": "qwen-vl", "messages": user("Describe this picture.", picture),
           "max_tokens": 24}  # fmt: skip
    plain = served.chat(ask)[1]["choices"][0]["message"]["content"]
    penalties = {"presence_penalty": 1.5, "frequency_penalty": 1.0}
    penalised = served.chat({**ask, **penalties})[1]["choices"][0]["message"]["content"]
    assert penalised != plain
    body = {"text_input": "Describe this picture.", "image": [data_url(picture)],
            "max_tokens": 24, **penalties}  # fmt: skip
    status, direct = served.request("POST", "/v2/models/qwen-vl/generate", body)
    assert status == 200 and direct["text_output"] == penalised
