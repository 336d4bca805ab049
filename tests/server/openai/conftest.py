"""Fixtures of the OpenAI-compatible front end's tests: ``mmaas serve`` on a copy of
models/qwen-vl (compiled on this host, the real server, the real engines), with an API
key in a secret file, fetching pictures from 127.0.0.1 (allowed) within 3 s, for the whole
package; a small JSON-over-HTTP client; a real HTTP server of the pictures."""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mmaas.pipelines.qwen2_vl.convert.converter import FILES  # what a converted model holds
from server.conftest import free_ports

from .picture_server import Origin, picture_server

MMAAS = str(Path(sys.executable).parent / "mmaas")
KEY = "sk-test-7f3a"
DECODE_BYTES = 256 << 20  # MMAAS_MAX_DECODE_BYTES of the served model: 32 MP at a time


@dataclass
class Served:
    """A running ``mmaas serve``: its HTTP and gRPC ports, the API key, its log."""

    http_port: int
    grpc_port: int
    log: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}/v1"

    def request(
        self, method: str, path: str, body: Any = None, key: str | None = KEY,
        headers: dict[str, str] | None = None, raw: bytes | None = None,
    ) -> tuple[int, Any]:  # fmt: skip
        """(status, decoded JSON or the text of an event stream) of one request."""
        connection = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=120)
        sent = dict(headers or {})
        if key:
            sent["Authorization"] = f"Bearer {key}"
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        if data is not None:
            sent.setdefault("Content-Type", "application/json")
        connection.request(method, path, data, sent)
        reply = connection.getresponse()
        text = reply.read().decode()
        connection.close()
        if reply.getheader("content-type", "").startswith("text/event-stream"):
            return reply.status, text
        return reply.status, json.loads(text)

    def chat(self, body: dict, **options: Any) -> tuple[int, Any]:
        return self.request("POST", "/v1/chat/completions", body, **options)


def data_url(data: bytes, mime: str = "image/jpeg") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def user(text: str, *pictures: bytes, mime: str = "image/jpeg") -> list[dict]:
    """One user message: each picture as an image_url part, then the text (the layout of
    the generate endpoint's text_input with its images)."""
    parts: list[dict] = [{"type": "image_url", "image_url": {"url": data_url(p, mime)}}
                         for p in pictures]  # fmt: skip
    return [{"role": "user", "content": [*parts, {"type": "text", "text": text}]}]


def events(stream: str) -> list[Any]:
    """The ``data:`` payloads of an event stream, JSON-decoded ([DONE] kept as a string)."""
    out: list[Any] = []
    for line in stream.splitlines():
        if line.startswith("data: "):
            payload = line[len("data: ") :]
            out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


@contextlib.contextmanager
def serving(
    export: Path, root: Path, env: dict[str, str], metrics_port: int = 0
) -> Iterator[Served]:
    """``mmaas serve`` on a copy of the model in ``export`` (under ``root``) with ``env``
    added, the key in MMAAS_OPENAI_API_KEY_FILE, until the block ends."""
    folder = root / "qwen-vl"
    folder.mkdir()
    for name in FILES:
        shutil.copy(export / name, folder / name)
    (root / "key").write_text(KEY + "\n")
    http_port, grpc_port = free_ports(2)
    log = root / "serve.log"
    env = {**os.environ, "MMAAS_OPENAI_API_KEY_FILE": str(root / "key"), **env}
    argv = [MMAAS, "serve", str(folder), "--http-port", str(http_port), "--grpc-port",
            str(grpc_port), "--metrics-port", str(metrics_port)]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 240
        while True:
            assert process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            try:
                url = f"http://127.0.0.1:{http_port}/v2/health/ready"
                with urllib.request.urlopen(url, timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        yield Served(http_port, grpc_port, log)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)


@pytest.fixture(scope="package")
def served(qwen_vl_export: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``mmaas serve`` on a copy of models/qwen-vl, the key in MMAAS_OPENAI_API_KEY_FILE,
    at most :data:`DECODE_BYTES` of decoded pictures in flight."""
    env = {"MMAAS_MAX_DECODE_BYTES": str(DECODE_BYTES), "MMAAS_FETCH_ALLOW": "127.0.0.1",
           "MMAAS_FETCH_TIMEOUT_S": "3"}  # fmt: skip
    with serving(qwen_vl_export, tmp_path_factory.mktemp("openai"), env) as served:
        yield served


@pytest.fixture(scope="package")
def pictures(qwen_vl_pictures: Path) -> dict[str, bytes]:
    """The real photographs' encoded bytes by file name."""
    return {path.name: path.read_bytes() for path in sorted(qwen_vl_pictures.iterdir())}


@pytest.fixture(scope="package")
def origin(pictures: dict[str, bytes]) -> Iterator[Origin]:
    """A real HTTP server of the pictures (``/files/<name>``; picture_server.py)."""
    with picture_server(pictures) as running:
        yield running


@pytest.fixture(scope="package")
def reference(qwen_vl_export: Path):
    """transformers' tokenizer + processor + model of the checkpoint."""
    from mmaas.pipelines.qwen2_vl.export.reference import Reference

    return Reference(qwen_vl_export / "checkpoint", num_threads=2)
