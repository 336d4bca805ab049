"""The rule that model.yaml's ``runtime:`` ports and the server's ``MMAAS_*_PORT`` settings
share: each endpoint (gRPC, HTTP, metrics) listens on its own port, and port 0 turns an
endpoint off, so it takes no port. And the health questions an orchestrator asks, the
server answers and the exports' probes name:

* live (restart the container when it fails): gRPC ``grpc.health.v1`` service
  :data:`LIVENESS_SERVICE` (SERVING from the moment the gRPC port is open until SIGTERM,
  whatever the models' states), HTTP :data:`LIVE_PATH`;
* ready (route requests to it): gRPC service ``""`` (SERVING while every model is
  ready: not while engines load, not after an unload), HTTP :data:`READY_PATH`.
"""

from __future__ import annotations

from collections.abc import Sequence

LIVENESS_SERVICE = "liveness"
LIVE_PATH = "/v2/health/live"
READY_PATH = "/v2/health/ready"


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
