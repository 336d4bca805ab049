"""A chat request's pictures as bytes: ``data:`` URLs decoded (:mod:`.pictures`), ``http(s)``
URLs fetched with httpx on the event loop, all of a request's at once, before the request
enters the request path (never on the engine's thread).

Rules (the ``MMAAS_FETCH_*`` settings, docs/openai.md):

* ``MMAAS_FETCH_PICTURES=false``: an http(s) URL is refused (data: URLs only).
* Every hop (the URL, then each redirect's ``Location``) is checked before any connection:
  scheme http or https; the host resolved, and every address it resolves to public, or in
  ``MMAAS_FETCH_ALLOW``: loopback, private, link-local, shared (100.64/10), reserved,
  multicast and unspecified addresses are refused. The connection goes to the checked
  address (the ``Host`` header and TLS server name are the URL's host, certificates are
  verified against it), so a second resolution cannot point it elsewhere. No proxy from
  the environment is used.
* Redirects (301, 302, 303, 307, 308) are followed up to ``MMAAS_FETCH_MAX_REDIRECTS``.
* The answer must be 2xx; its body at most ``MMAAS_FETCH_MAX_BYTES`` (a larger
  ``Content-Length`` is refused unread, a longer body as soon as it passes the cap, decoded
  bytes counted) and start as an accepted picture format does (its ``Content-Type`` is not
  trusted either way).
* The whole fetch (resolution, every hop, the body) within ``MMAAS_FETCH_TIMEOUT_S``.

Each failure is a ChatError, 400 (the client's URL; a 5xx would make the SDK retry it),
``param`` at the part, naming the URL's host and what failed, never the fetched content.
httpx is imported on the first fetch: the qwen2-vl kind's images carry it (its
``runtime_packages``), the only ones serving the chat endpoint.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mmaas.server.openai.errors import ChatError
from mmaas.server.openai.pictures import ACCEPTED, data_url_bytes, sniff, url_scheme
from mmaas.server.settings import FetchSettings

if TYPE_CHECKING:
    import httpx

REDIRECTS = (301, 302, 303, 307, 308)
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class Fetcher:
    """The pictures of requests under one :class:`FetchSettings` (see the module docstring);
    one httpx client, made on the first fetch."""

    def __init__(self, settings: FetchSettings) -> None:
        self.settings = settings
        self.allow = [ipaddress.ip_network(network) for network in settings.allow]
        self.client: httpx.AsyncClient | None = None

    async def pictures(self, sources: Sequence[tuple[str, str]]) -> list[bytes]:
        """The bytes of each (param, URL), in order, fetched concurrently; the first failure
        cancels the others and is raised (ChatError)."""
        tasks = [asyncio.ensure_future(self.picture(url, param)) for param, url in sources]
        try:
            return list(await asyncio.gather(*tasks))
        finally:
            for task in tasks:
                task.cancel()

    async def picture(self, url: str, param: str) -> bytes:
        """One picture's bytes (ChatError on every failure)."""
        if url_scheme(url) == "data":
            return data_url_bytes(url, param)
        if not self.settings.enabled:
            raise ChatError("this server does not fetch picture URLs (MMAAS_FETCH_PICTURES is "
                            "false); send the picture as a data: URL", param)  # fmt: skip
        import httpx

        try:
            return await asyncio.wait_for(self._fetch(httpx.URL(url), param),
                                          self.settings.timeout_s)  # fmt: skip
        except TimeoutError:
            raise ChatError(f"fetching the picture took over {self.settings.timeout_s:g} s "
                            "(MMAAS_FETCH_TIMEOUT_S)", param) from None  # fmt: skip
        except httpx.InvalidURL:
            raise ChatError("the picture URL is not a valid URL", param) from None
        except httpx.HTTPError as exc:
            raise ChatError(f"fetching the picture failed: {type(exc).__name__}", param) from None

    async def _fetch(self, url: httpx.URL, param: str) -> bytes:
        """Follow the hops (see the module docstring) and read the body."""
        client = self._client()
        for _ in range(self.settings.max_redirects + 1):
            address = await self._checked(url, param)
            request = client.build_request(
                "GET", url.copy_with(host=address), headers={"Host": _host_header(url)},
                extensions={"sni_hostname": url.host},
            )  # fmt: skip
            response = await client.send(request, stream=True)
            try:
                if response.status_code in REDIRECTS and "location" in response.headers:
                    url = url.join(response.headers["location"])
                    continue
                if not response.is_success:
                    raise ChatError(f"the picture URL's host {url.host!r:.80} answered HTTP "
                                    f"{response.status_code}", param)  # fmt: skip
                return await self._body(response, url, param)
            finally:
                await response.aclose()
        raise ChatError(f"the picture URL redirected more than {self.settings.max_redirects} "
                        "times (MMAAS_FETCH_MAX_REDIRECTS)", param)  # fmt: skip

    async def _checked(self, url: httpx.URL, param: str) -> str:
        """The address to connect to for ``url``, once the hop passes the rules."""
        if url.scheme not in ("http", "https") or not url.host:
            raise ChatError(f"a picture URL must be http(s) with a host; a hop leads to "
                            f"{url.scheme!r:.20}", param)  # fmt: skip
        port = url.port or (443 if url.scheme == "https" else 80)
        try:
            found = await asyncio.get_running_loop().getaddrinfo(
                url.host, port, type=socket.SOCK_STREAM
            )
        except (socket.gaierror, UnicodeError):
            raise ChatError(f"cannot resolve the picture URL's host {url.host!r:.80}",
                            param) from None  # fmt: skip
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in found]
        if not addresses or not all(self._allowed(address) for address in addresses):
            raise ChatError(
                f"the picture URL's host {url.host!r:.80} is a loopback, private, link-local "
                "or reserved address: not fetched (MMAAS_FETCH_ALLOW lists the networks a "
                "deployer permits)",
                param,
            )
        return str(addresses[0])

    def _allowed(self, address: Address) -> bool:
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
            address = address.ipv4_mapped
        if any(address in network for network in self.allow):
            return True
        return address.is_global and not address.is_multicast

    async def _body(self, response: httpx.Response, url: httpx.URL, param: str) -> bytes:
        """The body within the cap, holding a picture of an accepted format."""
        cap = self.settings.max_bytes
        declared = response.headers.get("content-length", "")
        too_large = (f"the picture at {url.host!r:.80} is over {cap} bytes "
                     "(MMAAS_FETCH_MAX_BYTES)")  # fmt: skip
        if declared.isdigit() and int(declared) > cap:
            raise ChatError(too_large, param)
        data = bytearray()
        async for chunk in response.aiter_bytes():
            data += chunk
            if len(data) > cap:
                raise ChatError(too_large, param)
        if sniff(bytes(data[:16])) is None:
            kind = response.headers.get("content-type", "none")
            raise ChatError(f"the content at {url.host!r:.80} is not a picture of an accepted "
                            f"format ({ACCEPTED}); its Content-Type: {kind!r:.60}",
                            param)  # fmt: skip
        return bytes(data)

    def _client(self) -> httpx.AsyncClient:
        import httpx

        if self.client is None:
            self.client = httpx.AsyncClient(follow_redirects=False, trust_env=False,
                                            timeout=self.settings.timeout_s)  # fmt: skip
        return self.client


def _host_header(url: httpx.URL) -> str:
    """``host[:port]`` as the URL names it (the port only when not the scheme's)."""
    host = f"[{url.host}]" if ":" in url.host else url.host
    return f"{host}:{url.port}" if url.port else host
