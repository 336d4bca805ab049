"""Pictures fetched from http(s) URLs (the OpenAI front end's :class:`Fetcher`) from a real
local HTTP server: a picture arrives byte for byte; loopback, private and link-local targets
are refused before any connection unless allowed, also when a redirect leads there (every
hop re-checked); the redirect cap; a slow body meets the timeout; an oversized body is
refused (declared, or counted while read); content that is no picture, an error status and
other schemes are refused, never echoing what was fetched; the off switch leaves data URLs
only. Every refusal is a 400 ChatError naming the part."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from mmaas.server.openai.errors import ChatError
from mmaas.server.openai.fetch import Fetcher
from mmaas.server.settings import FetchSettings

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)
SECRET = b"<html>internal admin page: s3cr3t-token</html>"
PARAM = "messages[0].content[1].image_url.url"
LOCAL = FetchSettings(allow=("127.0.0.1/32",), timeout_s=2.0, max_bytes=4096)


class Handler(BaseHTTPRequestHandler):
    """/pic.png, /html, /missing (404), /redirect?to=URL, /hops?n=N (N redirects, then the
    picture), /slow (headers, then a byte a second), /big (Content-Length over the cap),
    /stream-big (no length, 8 KB), every request's path recorded."""

    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        type(self).seen.append(self.path)
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        if url.path == "/pic.png":
            self._send(200, PNG, "image/png")
        elif url.path == "/html":
            self._send(200, SECRET, "text/html")
        elif url.path == "/redirect":
            self._send(302, b"", "text/plain", {"Location": query["to"]})
        elif url.path == "/hops":
            left = int(query["n"])
            target = f"/hops?n={left - 1}" if left > 1 else "/pic.png"
            self._send(307, b"", "text/plain", {"Location": target})
        elif url.path == "/slow":
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            with contextlib.suppress(OSError):  # the client gave up: so it should
                for _ in range(100):
                    self.wfile.write(PNG[:1])
                    self.wfile.flush()
                    time.sleep(1)
        elif url.path == "/big":
            self._send(200, PNG + b"\0" * 5000, "image/png")
        elif url.path == "/stream-big":
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.end_headers()
            self.wfile.write(PNG + b"\0" * 8192)
        else:
            self._send(404, SECRET, "text/html")

    def _send(self, status: int, body: bytes, kind: str, headers: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        """Quiet."""


@pytest.fixture(scope="module")
def origin() -> Iterator[str]:
    """A real HTTP server on 127.0.0.1: its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def fetch(url: str, settings: FetchSettings = LOCAL) -> bytes:
    return asyncio.run(Fetcher(settings).picture(url, PARAM))


def refused(url: str, settings: FetchSettings = LOCAL) -> str:
    with pytest.raises(ChatError) as raised:
        fetch(url, settings)
    error = raised.value
    assert error.status == 400 and error.param == PARAM
    assert "s3cr3t" not in error.message and "internal admin" not in error.message
    return error.message


def test_a_picture_arrives_byte_for_byte(origin: str) -> None:
    assert fetch(f"{origin}/pic.png") == PNG


def test_loopback_private_and_link_local_targets_are_refused_unconnected(origin: str) -> None:
    Handler.seen.clear()
    port = origin.rsplit(":", 1)[1]
    default = FetchSettings()
    for url in (f"{origin}/pic.png", f"http://localhost:{port}/pic.png",
                f"http://[::1]:{port}/pic.png", "http://10.1.2.3/pic.png",
                "http://169.254.169.254/latest/meta-data", "http://192.168.0.1/",
                "http://100.64.0.1/", "http://0.0.0.0/", f"http://[::ffff:127.0.0.1]:{port}/"):  # fmt: skip
        assert "a loopback, private, link-local or reserved address: not fetched" in refused(
            url, default
        ), url
    assert "is a loopback" in refused(f"http://127.0.0.2:{port}/pic.png")  # not the allowed one
    assert Handler.seen == []


def test_every_redirect_hop_is_checked_again(origin: str) -> None:
    Handler.seen.clear()
    for target in ("http://10.0.0.7/pic.png", "http://169.254.169.254/", "http://127.0.0.2/"):
        message = refused(f"{origin}/redirect?to={target}")
        assert "is a loopback, private, link-local or reserved address" in message
    assert "must be http(s) with a host; a hop leads to 'file'" in refused(
        f"{origin}/redirect?to=file:///etc/passwd"
    )
    assert all(path.startswith("/redirect") for path in Handler.seen)  # nothing else fetched


def test_redirects_are_followed_up_to_the_cap(origin: str) -> None:
    assert fetch(f"{origin}/hops?n=3") == PNG
    message = refused(f"{origin}/hops?n=4")
    assert message == "the picture URL redirected more than 3 times (MMAAS_FETCH_MAX_REDIRECTS)"
    none = FetchSettings(allow=("127.0.0.1",), max_redirects=0)
    assert "redirected more than 0 times" in refused(f"{origin}/hops?n=1", none)


def test_a_slow_body_meets_the_timeout(origin: str) -> None:
    started = time.monotonic()
    assert refused(f"{origin}/slow") == (
        "fetching the picture took over 2 s (MMAAS_FETCH_TIMEOUT_S)"
    )
    assert time.monotonic() - started < 5


def test_oversized_bodies_are_refused(origin: str) -> None:
    for path in ("/big", "/stream-big"):
        message = refused(f"{origin}{path}")
        assert message == "the picture at '127.0.0.1' is over 4096 bytes (MMAAS_FETCH_MAX_BYTES)"


def test_no_picture_an_error_status_or_no_server_is_refused(origin: str) -> None:
    assert refused(f"{origin}/html") == (
        "the content at '127.0.0.1' is not a picture of an accepted format (image/bmp, "
        "image/gif, image/jpeg, image/png, image/tiff, image/webp); its Content-Type: "
        "'text/html'"
    )
    assert refused(f"{origin}/missing") == "the picture URL's host '127.0.0.1' answered HTTP 404"
    assert refused("http://127.0.0.1:1/pic.png") == "fetching the picture failed: ConnectError"
    assert refused("http://no-such-host.invalid/p.png").startswith("cannot resolve the picture")


def test_fetching_turned_off_leaves_data_urls_only(origin: str) -> None:
    off = FetchSettings(enabled=False, allow=("127.0.0.1",))
    assert "does not fetch picture URLs (MMAAS_FETCH_PICTURES is false)" in refused(
        f"{origin}/pic.png", off
    )
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert fetch(url, off) == PNG


def test_several_pictures_come_in_order(origin: str) -> None:
    sources = [(f"p{i}", f"{origin}/{name}") for i, name in enumerate(["pic.png", "hops?n=1"])]
    assert asyncio.run(Fetcher(LOCAL).pictures(sources)) == [PNG, PNG]
    with pytest.raises(ChatError) as raised:
        asyncio.run(Fetcher(LOCAL).pictures([*sources, ("p2", f"{origin}/html")]))
    assert raised.value.param == "p2"
