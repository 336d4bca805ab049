"""The built image's OpenAI-compatible routes with the real clients (the openai SDK sync,
async, streaming and ``with_raw_response``, LangChain, LiteLLM; tests/server/openai/
real_clients.py in .venv-openai): each gets the answer the KServe gRPC interface gives for
the same greedy request, token for token; and a conversation whose picture the image
fetches with its httpx from an HTTP server inside the container (its own loopback, allowed
by MMAAS_FETCH_ALLOW), ``n`` choices, logprobs and penalties, as the KServe interface's
``messages`` input gives them."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from scripts import qwen_vl_client as client

from mmaas.core import proc

from .conftest import KEY

pytestmark = [pytest.mark.docker, pytest.mark.slow]
TESTS = Path(__file__).resolve().parents[3]
PYTHON = Path(sys.executable).parent.parent.parent / ".venv-openai" / "bin" / "python"


def serve_inside(server, picture: Path) -> None:
    """An HTTP server of ``picture`` on the container's loopback port 8090, answering."""
    docker, python = server.docker, "/opt/mmaas/venv/bin/python"
    proc.run([*docker, "exec", server.id, "mkdir", "-p", "/tmp/pictures"])
    proc.run([*docker, "cp", str(picture), f"{server.id}:/tmp/pictures/rocket.jpg"])
    proc.run([*docker, "exec", "--detach", server.id, python, "-m", "http.server", "8090",
              "--bind", "127.0.0.1", "--directory", "/tmp/pictures"])  # fmt: skip
    probe = "import urllib.request as u; u.urlopen('http://127.0.0.1:8090/rocket.jpg')"
    for _ in range(50):
        if proc.run([*docker, "exec", server.id, python, "-c", probe], check=False).returncode == 0:
            return
        time.sleep(0.2)
    raise AssertionError("the picture server in the container did not answer")


def test_real_openai_clients_get_the_kserve_answer(server, url, qwen_vl_pictures) -> None:
    assert PYTHON.exists(), "the OpenAI clients' venv is missing: run scripts/setup.sh"
    picture = qwen_vl_pictures / "rocket.jpg"
    base = f"http://127.0.0.1:{server.ports[8000]}/v1"
    script = TESTS / "server" / "openai" / "real_clients.py"
    serve_inside(server, picture)
    talk = [
        {"role": "system", "content": "You describe photographs."},
        {"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "http://127.0.0.1:8090/rocket.jpg"}},
            {"type": "text", "text": "What is this?"}]},
        {"role": "assistant", "content": "A rocket."},
        {"role": "user", "content": "And its colour?"},
    ]  # fmt: skip
    done = subprocess.run([str(PYTHON), str(script), base, KEY, str(picture), json.dumps(talk)],
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
    turns = [{**m, "content": [{"type": "image"} if p["type"] == "image_url" else p
                               for p in m["content"]]} if isinstance(m["content"], list) else m
             for m in talk]  # fmt: skip
    jpeg = "data:image/jpeg;base64," + base64.b64encode(picture.read_bytes()).decode()
    generate = {"messages": json.dumps(turns), "image": [jpeg], "max_tokens": 8}
    request = urllib.request.Request(
        f"http://127.0.0.1:{server.ports[8000]}/v2/models/qwen-vl/generate",
        json.dumps(generate).encode(),
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as reply:
        same = json.loads(reply.read())
    features = got["features"]
    assert features["talk"] == got["langchain"]["talk"] == got["litellm"]["talk"]
    assert features["talk"] == same["text_output"]
    assert features["talk_usage"]["prompt_tokens"] == same["num_input_tokens"]
    assert [index for index, _ in features["n"]] == [0, 1, 2] and features["n_usage"] == 18
    assert features["logprobs"] == features["streamed_logprobs"]
    assert len(features["logprobs"]) == 6 and features["penalised"] != features["talk"]
