"""The server's ports: a free-port probe that fails with one clear line before anything
else starts (before the bring-up and before gRPC logs its own error), and the listen
address form gRPC takes (IPv6 in brackets)."""

from __future__ import annotations

import socket

from mmaas.core.errors import MmaasError


def check_free(
    host: str, port: int, variable: str, fix: str = "is another server using the port?"
) -> None:
    """Raise MmaasError naming ``variable`` (and ``fix``) when ``host:port`` cannot be
    bound."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host.strip("[]"), port))
        except OSError as exc:
            raise MmaasError(
                f"cannot listen on {listen_address(host, port)} ({variable}): {exc.strerror}; {fix}"
            ) from None


def listen_address(host: str, port: int) -> str:
    """``host:port``, with an IPv6 ``host`` in brackets."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"
