"""The clients people use, nobody here wrote them, against ``mmaas serve models/qwen-vl``:
the openai SDK (sync, async, streaming, ``with_raw_response`` for statuses), LangChain's
``ChatOpenAI(base_url=...)`` and LiteLLM as an OpenAI-compatible provider, each getting
the same greedy answer as a plain HTTP request (they run in .venv-openai:
scripts/install_clients.sh)."""

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


def test_real_clients_get_the_served_answer(served, qwen_vl_pictures) -> None:
    assert PYTHON.exists(), "the OpenAI clients' venv is missing: run scripts/setup.sh"
    picture = qwen_vl_pictures / "rocket.jpg"
    done = subprocess.run(
        [str(PYTHON), str(SCRIPT), served.base_url, KEY, str(picture)],
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
    assert got["litellm"] == {"text": text, "prompt_tokens": usage["prompt_tokens"]}
