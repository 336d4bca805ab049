"""``python -m mmaas.server.probe``: the image's Docker ``HEALTHCHECK``.

Asks this container's server the standard gRPC health question (``grpc.health.v1``,
service ""), on ``127.0.0.1:MMAAS_GRPC_PORT``: exit 0 when it answers SERVING, 1 otherwise
(NOT_SERVING while the engine loads and from the moment SIGTERM arrives, or no answer),
with one line on stderr saying which. With TLS on (``MMAAS_TLS_CERT``) the probe holds no
certificate its server would trust (nor one for mutual TLS), so it only checks that the
port takes connections; use the orchestrator's TLS-aware gRPC probe there.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping

from mmaas.core.errors import UsageError
from mmaas.core.runtime_settings import GRPC_PORT, TLS_CERT

TIMEOUT_S = 3.0


def probe(environ: Mapping[str, str]) -> tuple[int, str]:
    """(exit code, message) of one health check against the local server."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    try:
        port = GRPC_PORT.read(environ)
    except UsageError as exc:
        return 1, exc.message
    target = f"127.0.0.1:{port}"
    if environ.get(TLS_CERT.env):
        try:
            socket.create_connection(("127.0.0.1", port), TIMEOUT_S).close()
        except OSError as exc:
            return 1, f"port {port} takes no connections: {exc}"
        return 0, f"port {port} takes connections (TLS: health not asked)"
    channel = grpc.insecure_channel(target)
    with channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=TIMEOUT_S)
        except grpc.RpcError as exc:
            return 1, f"no health answer on {target}: {exc.code().name}"
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    return (0 if status == "SERVING" else 1), f"{target}: {status}"


def main() -> int:
    """Run :func:`probe` on this process's environment; print its line to stderr."""
    code, message = probe(os.environ)
    print(f"mmaas probe: {message}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
