"""Everything under ``/v1`` answers in OpenAI's error shape (an unknown path, a wrong
method, KServe's binary data header), while ``/v2`` keeps KServe's; real server, httpx."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from ..conftest import RunningServer


@pytest.fixture(scope="module")
def base(module_server: Callable[..., RunningServer], cls_dir: Path) -> str:
    return f"http://{module_server(cls_dir).http_url}"


def openai_error(reply: httpx.Response, status: int) -> dict:
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"] == "application/json"
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert isinstance(error["message"], str) and error["type"] == "invalid_request_error"
    return error


def test_wrong_method_is_openai_405(base: str) -> None:
    reply = httpx.get(f"{base}/v1/chat/completions")
    error = openai_error(reply, 405)
    assert reply.headers["allow"] == "POST"
    assert "GET /v1/chat/completions" in error["message"] and "POST" in error["message"]
    assert error["code"] == "method_not_allowed"


def test_unknown_path_is_openai_404(base: str) -> None:
    error = openai_error(httpx.get(f"{base}/v1/bogus"), 404)
    assert "GET /v1/bogus" in error["message"] and error["code"] == "not_found"
    openai_error(httpx.post(f"{base}/v1/models/x/y", json={}), 405)


def test_binary_header_is_openai_400(base: str) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    reply = httpx.post(
        f"{base}/v1/chat/completions", json=body, headers={"Inference-Header-Content-Length": "5"}
    )
    error = openai_error(reply, 400)
    assert "Inference-Header-Content-Length '5'" in error["message"]
    assert "/v1/chat/completions" in error["message"]


def test_kserve_paths_keep_kserve_errors(base: str) -> None:
    reply = httpx.get(f"{base}/v2/bogus")
    assert reply.status_code == 404 and isinstance(reply.json()["error"], str)
    reply = httpx.get(f"{base}/v2/models/ppocr-cls/infer")
    assert reply.status_code == 405 and isinstance(reply.json()["error"], str)
    reply = httpx.post(
        f"{base}/v2/repository/index", headers={"Inference-Header-Content-Length": "5"}
    )
    assert reply.status_code == 400 and "Inference-Header-Content-Length" in reply.json()["error"]
    assert httpx.get(f"{base}/v1/models").json() == {"object": "list", "data": []}
