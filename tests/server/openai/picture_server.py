"""A real HTTP server on 127.0.0.1 for the picture-fetching tests: /files/<name> (the
pictures it is given), /pic.png (a 1x1 PNG), /html (a page holding a secret that no error
may echo), /missing (404, the same page), /redirect?to=URL (302), /hops?n=N (N 307
redirects, then /pic.png), /slow (a byte a second), /big (Content-Length over 4 KiB),
/stream-big (8 KiB without a length); every request's path recorded in ``seen``.
Each server has a handler class of its own (its files, its record)."""

from __future__ import annotations

import base64
import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar
from urllib.parse import parse_qs, urlparse

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)
SECRET = b"<html>internal admin page: s3cr3t-token</html>"


class Handler(BaseHTTPRequestHandler):
    """See the module docstring."""

    seen: ClassVar[list[str]] = []
    files: ClassVar[dict[str, bytes]] = {}

    def do_GET(self) -> None:
        type(self).seen.append(self.path)
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        name = url.path.removeprefix("/files/")
        if name in self.files:
            self._send(200, self.files[name], "application/octet-stream")
        elif url.path == "/pic.png":
            self._send(200, PNG, "image/png")
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
            with contextlib.suppress(OSError):  # the client gave up, as it should
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
            self._send(200 if url.path == "/html" else 404, SECRET, "text/html")

    def _send(self, status: int, body: bytes, kind: str, headers: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        with contextlib.suppress(OSError):
            self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        """Quiet."""


@dataclass
class Origin:
    """A running picture server: its base URL and the paths it was asked for."""

    url: str
    seen: list[str]


@contextlib.contextmanager
def picture_server(files: dict[str, bytes] | None = None) -> Iterator[Origin]:
    """The server, running in a thread, serving ``files``."""
    handler = type("Served", (Handler,), {"files": dict(files or {}), "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Origin(f"http://127.0.0.1:{server.server_address[1]}", handler.seen)
    finally:
        server.shutdown()
        server.server_close()
