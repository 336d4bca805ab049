"""The built image's OpenAI-compatible routes with the real clients (the openai SDK sync,
async, streaming and ``with_raw_response``, LangChain, LiteLLM; tests/server/openai/
real_clients.py in .venv-openai): each gets the answer the KServe gRPC interface gives for
the same greedy request, token for token."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from scripts import qwen_vl_client as client

from .conftest import KEY

pytestmark = [pytest.mark.docker, pytest.mark.slow]
TESTS = Path(__file__).resolve().parents[3]
PYTHON = Path(sys.executable).parent.parent.parent / ".venv-openai" / "bin" / "python"


def test_real_openai_clients_get_the_kserve_answer(server, url, qwen_vl_pictures) -> None:
    assert PYTHON.exists(), "the OpenAI clients' venv is missing: run scripts/setup.sh"
    picture = qwen_vl_pictures / "rocket.jpg"
    base = f"http://127.0.0.1:{server.ports[8000]}/v1"
    script = TESTS / "server" / "openai" / "real_clients.py"
    done = subprocess.run([str(PYTHON), str(script), base, KEY, str(picture)],
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    text = client.ask(url, "qwen-vl", "Describe this picture.", [picture.read_bytes()],
                      max_tokens=12).text  # fmt: skip
    assert got["sync"]["text"] == got["stream"]["text"] == got["async"] == text
    assert got["langchain"]["text"] == got["langchain"]["streamed"] == text
    assert got["litellm"]["text"] == text
    assert got["raw"]["good"] == 200 and got["raw"]["wrong_key"] == 401
    assert got["raw"]["n"] == [400, "n"]
