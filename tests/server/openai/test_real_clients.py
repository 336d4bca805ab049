"""The clients people use, nobody here wrote them, against ``mmaas serve models/qwen-vl``:
the openai SDK (sync, async, streaming, ``with_raw_response`` for statuses), LangChain's
``ChatOpenAI(base_url=...)`` and LiteLLM as an OpenAI-compatible provider, each getting
the same greedy answer as a plain HTTP request (they run in .venv-openai:
scripts/install_clients.sh); and a conversation with a picture the server fetches, ``n``
choices, logprobs (unary and streamed) and penalties, equal to the plain requests'."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import KEY, user

pytestmark = pytest.mark.slow
PYTHON = Path(sys.executable).parent.parent.parent / ".venv-openai" / "bin" / "python"
SCRIPT = Path(__file__).with_name("real_clients.py")


def test_real_clients_get_the_served_answer(served, qwen_vl_pictures, origin) -> None:
    assert PYTHON.exists(), "the OpenAI clients' venv is missing: run scripts/setup.sh"
    picture = qwen_vl_pictures / "rocket.jpg"
    remote = f"{origin.url}/files/rocket.jpg"
    talk = [
        {"role": "system", "content": "You describe photographs."},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": remote}},
                                     {"type": "text", "text": "What is this?"}]},
        {"role": "assistant", "content": "A rocket."},
        {"role": "user", "content": "And its colour?"},
    ]  # fmt: skip
    done = subprocess.run(
        [str(PYTHON), str(SCRIPT), served.base_url, KEY, str(picture), json.dumps(talk)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    body = {"model": "qwen-vl", "messages": user("Describe this picture.", picture.read_bytes()),
            "max_tokens": 12, "temperature": 0}  # fmt: skip
    _, plain = served.chat(body)
    text, usage = plain["choices"][0]["message"]["content"], plain["usage"]
    assert got["sync"] == {"text": text, "finish": "length", "usage": got["sync"]["usage"]}
    assert {k: got["sync"]["usage"][k] for k in usage} == usage
    assert got["stream"] == {"text": text, "reasons": ["length"], "usage": got["stream"]["usage"]}
    assert got["stream"]["usage"]["prompt_tokens"] == usage["prompt_tokens"]
    assert got["async"] == text
    assert got["raw"] == {"good": 200, "n": [400, "n"], "wrong_key": 401,
                          "bad_picture": [400, "messages[0].content[0].image_url.url"]}  # fmt: skip
    assert got["models"] == ["qwen-vl"]
    assert got["langchain"]["text"] == got["langchain"]["streamed"] == text
    assert got["langchain"]["usage"]["input_tokens"] == usage["prompt_tokens"]
    features = got["features"]
    _, plain = served.chat({"model": "qwen-vl", "messages": talk, "max_tokens": 8})
    assert features["talk"] == plain["choices"][0]["message"]["content"]
    assert features["talk_usage"]["prompt_tokens"] == plain["usage"]["prompt_tokens"]
    assert got["langchain"]["talk"] == got["litellm"]["talk"] == features["talk"]
    assert got["langchain"]["talk_logprobs"] == 8
    _, many = served.chat({"model": "qwen-vl", "messages": talk, "max_tokens": 6, "n": 3,
                           "seed": 5, "temperature": 1.0})  # fmt: skip
    assert features["n"] == [[c["index"], c["message"]["content"]] for c in many["choices"]]
    assert features["n_usage"] == many["usage"]["completion_tokens"] == 18
    _, scored = served.chat({"model": "qwen-vl", "messages": talk, "max_tokens": 6,
                             "logprobs": True, "top_logprobs": 2})  # fmt: skip
    assert features["logprobs"] == features["streamed_logprobs"]
    assert features["logprobs"] == scored["choices"][0]["logprobs"]["content"]
    assert features["penalised"] != features["talk"]
    assert got["litellm"]["text"] == text
    assert got["litellm"]["prompt_tokens"] == usage["prompt_tokens"]
