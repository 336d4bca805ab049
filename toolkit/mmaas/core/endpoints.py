"""The rule that model.yaml's ``runtime:`` ports and the server's ``MMAAS_*_PORT`` settings
share: each endpoint (gRPC, HTTP, metrics) listens on its own port, and port 0 turns an
endpoint off, so it takes no port."""

from __future__ import annotations

from collections.abc import Sequence


def shared_port(ports: Sequence[tuple[str, int]]) -> tuple[str, str] | None:
    """The first endpoint in ``ports`` (``(name, port)`` pairs, in order) whose port an
    earlier endpoint already holds, paired with that earlier endpoint's name; None when every
    endpoint has its own port. Port 0 (off) is never held."""
    held: dict[int, str] = {}
    for name, port in ports:
        if port in held:
            return name, held[port]
        if port:
            held[port] = name
    return None
