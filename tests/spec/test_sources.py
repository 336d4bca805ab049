"""Model sources: local paths with pins, and https downloads from a real local TLS server
(a self-signed certificate trusted through SSL_CERT_FILE, as behind a corporate proxy)."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from mmaas.build.spec_checks import host_checks
from mmaas.core.errors import SourceError
from mmaas.core.hashing import file_digests
from mmaas.spec.load import load_spec
from mmaas.spec.model import SourceSpec
from mmaas.spec.sources import fetch_url, resolve_source
from onnx_builder import IMAGE_MODEL, make_onnx
from tls import self_signed

ZEROS = "0" * 64


class Server:
    """A local https file server: ``url`` base, ``root`` folder, ``requests`` log."""

    def __init__(self, url: str, root: Path, requests: list[str]) -> None:
        self.url, self.root, self.requests = url, root, requests


@pytest.fixture
def https_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    self_signed(cert, key, "/CN=localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost")
    root = tmp_path / "www"
    root.mkdir()
    requests: list[str] = []

    class Handler(SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def do_GET(self) -> None:
            requests.append(self.path)
            super().do_GET()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    monkeypatch.setenv("MMAAS_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    yield Server(f"https://127.0.0.1:{server.server_port}", root, requests)
    server.shutdown()
    server.server_close()
    thread.join()


def _hex(path: Path, algo: str) -> str:
    return file_digests(path)[algo].split(":", 1)[1]


def test_download_is_pin_checked_cached_and_reused(https_server: Server, tmp_path: Path) -> None:
    model = make_onnx(https_server.root / "m.onnx", IMAGE_MODEL)
    pin = f"sha256:{_hex(model, 'sha256')}"
    first = fetch_url(f"{https_server.url}/m.onnx", [pin])
    assert first == tmp_path / "cache" / "sources" / f"sha256-{_hex(model, 'sha256')}.onnx"
    assert first.read_bytes() == model.read_bytes()
    assert fetch_url(f"{https_server.url}/m.onnx", [pin]) == first
    assert https_server.requests == ["/m.onnx"]


def test_blake3_pin(https_server: Server) -> None:
    model = make_onnx(https_server.root / "m.onnx", IMAGE_MODEL)
    got = fetch_url(f"{https_server.url}/m.onnx", [f"blake3:{_hex(model, 'blake3')}"])
    assert got.name.startswith("blake3-")


def test_wrong_pin_keeps_nothing(https_server: Server, tmp_path: Path) -> None:
    model = make_onnx(https_server.root / "m.onnx", IMAGE_MODEL)
    with pytest.raises(SourceError) as caught:
        fetch_url(f"{https_server.url}/m.onnx", [f"sha256:{ZEROS}"])
    assert str(caught.value).startswith(
        f"{https_server.url}/m.onnx: downloaded file fails its pin: "
    )
    assert f"sha256 is {_hex(model, 'sha256')}, but the spec pins {ZEROS}" in str(caught.value)
    cached = [p.name for p in (tmp_path / "cache" / "sources").iterdir()]
    assert cached == [f"sha256-{ZEROS}.onnx.lock"]


def test_missing_file_on_server(https_server: Server) -> None:
    with pytest.raises(SourceError, match=r"/nothing.onnx: download failed \(HTTP 404 "):
        fetch_url(f"{https_server.url}/nothing.onnx", [f"sha256:{ZEROS}"])


def test_untrusted_certificate_names_the_fix(
    https_server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(https_server.root / "no-such-bundle.pem"))
    with pytest.raises(SourceError, match=r"CERTIFICATE_VERIFY_FAILED.*set SSL_CERT_FILE"):
        fetch_url(f"{https_server.url}/m.onnx", [f"sha256:{ZEROS}"])


@pytest.mark.parametrize(
    ("url", "pins", "message"),
    [
        ("http://127.0.0.1:9/m.onnx", [f"sha256:{ZEROS}"], "only https URLs are accepted"),
        ("file:///tmp/m.onnx", [f"sha256:{ZEROS}"], "only https URLs are accepted"),
        ("https://127.0.0.1:9/m.onnx", [], "a URL source needs a pin"),
    ],
)
def test_refused_before_any_network(url: str, pins: list[str], message: str) -> None:
    with pytest.raises(SourceError, match=message):
        fetch_url(url, pins)


def test_spec_with_url_source_loads_the_download(https_server: Server, tmp_path: Path) -> None:
    model = make_onnx(https_server.root / "m.onnx", [("x", 1, [1, 2])])
    spec = tmp_path / "model.yaml"
    spec.write_text(
        f'name: m\nversion: "1"\nsource:\n  url: {https_server.url}/m.onnx\n'
        f"  sha256: {_hex(model, 'sha256')}\n"
    )
    loaded = load_spec(spec, checks=host_checks())
    assert loaded.source_path.parent == tmp_path / "cache" / "sources"
    assert loaded.spec.inputs[0].min == (1, 2)


def test_local_path_pins(tmp_path: Path) -> None:
    model = make_onnx(tmp_path / "m.onnx", IMAGE_MODEL)
    good = SourceSpec(path="m.onnx", sha256=_hex(model, "sha256"), blake3=_hex(model, "blake3"))
    assert resolve_source(good, tmp_path) == model
    with pytest.raises(
        SourceError,
        match=r"m.onnx: blake3 is .*, but the spec pins 0{64}; "
        r".* update source.blake3",
    ):
        resolve_source(SourceSpec(path="m.onnx", blake3=ZEROS), tmp_path)
