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
import time
from collections.abc import Iterator

import pytest

from mmaas.server.openai.errors import ChatError
from mmaas.server.openai.fetch import Fetcher
from mmaas.server.settings import FetchSettings

from .picture_server import PNG, Origin, picture_server

PARAM = "messages[0].content[1].image_url.url"
LOCAL = FetchSettings(allow=("127.0.0.1/32",), timeout_s=2.0, max_bytes=4096)


@pytest.fixture(scope="module")
def server() -> Iterator[Origin]:
    """The picture server."""
    with picture_server() as running:
        yield running


@pytest.fixture
def origin(server: Origin) -> str:
    """Its base URL, its record emptied."""
    server.seen.clear()
    return server.url


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


def test_loopback_private_and_link_local_targets_are_refused_unconnected(
    origin: str, server: Origin
) -> None:
    port = origin.rsplit(":", 1)[1]
    default = FetchSettings()
    for url in (f"{origin}/pic.png", f"http://localhost:{port}/pic.png",
                f"http://[::1]:{port}/pic.png", "http://10.1.2.3/pic.png",
                "http://169.254.169.254/latest/meta-data", "http://192.168.0.1/",
                "http://100.64.0.1/", "http://0.0.0.0/",
                f"http://[::ffff:127.0.0.1]:{port}/"):  # fmt: skip
        assert "a loopback, private, link-local or reserved address: not fetched" in refused(
            url, default
        ), url
    assert "is a loopback" in refused(f"http://127.0.0.2:{port}/pic.png")  # not the allowed one
    assert server.seen == []


def test_every_redirect_hop_is_checked_again(origin: str, server: Origin) -> None:
    for target in ("http://10.0.0.7/pic.png", "http://169.254.169.254/", "http://127.0.0.2/"):
        message = refused(f"{origin}/redirect?to={target}")
        assert "is a loopback, private, link-local or reserved address" in message
    assert "must be http(s) with a host; a hop leads to 'file'" in refused(
        f"{origin}/redirect?to=file:///etc/passwd"
    )
    assert all(path.startswith("/redirect") for path in server.seen)  # nothing else fetched


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


def test_schemes_are_case_insensitive(origin: str) -> None:
    """RFC 3986 section 3.1: ``HTTP://`` is ``http://``, ``DATA:`` is ``data:``."""
    assert fetch(origin.replace("http://", "HTTP://") + "/pic.png") == PNG
    assert fetch(origin.replace("http://", "hTTp://") + "/pic.png") == PNG
    assert fetch("DATA:image/png;BASE64," + base64.b64encode(PNG).decode()) == PNG
    off = FetchSettings(enabled=False)
    assert fetch("Data:image/png;base64," + base64.b64encode(PNG).decode(), off) == PNG
