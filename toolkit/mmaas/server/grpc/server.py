"""The gRPC front end's server: a ``grpc.aio`` server with the KServe v2 inference service
(:mod:`.servicer`, :mod:`.extensions`), the standard ``grpc.health.v1`` health service and
gRPC reflection v1 and v1alpha, on ``MMAAS_HOST:MMAAS_GRPC_PORT``, plain text or TLS
(mutual with ``MMAAS_TLS_CLIENT_CA``), with the keepalive settings of ``MMAAS_GRPC_*``."""

from __future__ import annotations

from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from mmaas.core.errors import MmaasError
from mmaas.server.context import ServerContext
from mmaas.server.grpc.extensions import Extensions
from mmaas.server.grpc.handlers import register
from mmaas.server.grpc.reflection import enable_reflection
from mmaas.server.grpc.servicer import SERVICE, InferenceServicer
from mmaas.server.ports import check_free, listen_address
from mmaas.server.settings import Settings

HEALTH_SERVICES = ("", SERVICE)


def grpc_server(settings: Settings, context: ServerContext, health: HealthServicer) -> Any:
    """The server with its services over ``context`` (the repository, shared memory,
    model control, log settings), bound to its port (not started).

    Raises:
        MmaasError: the port cannot be bound (another server uses it).
    """
    options = [
        ("grpc.max_receive_message_length", -1),
        ("grpc.max_send_message_length", -1),
        ("grpc.so_reuseport", 0),
        *settings.keepalive.options(),
    ]
    if settings.max_concurrent_streams:
        options.append(("grpc.max_concurrent_streams", settings.max_concurrent_streams))
    server = grpc.aio.server(options=options)
    register(InferenceServicer(context), Extensions(context), server)
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    enable_reflection((SERVICE, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name), server)
    address = listen_address(settings.host, settings.grpc_port)
    check_free(settings.host, settings.grpc_port, "MMAAS_GRPC_PORT")
    try:
        if settings.tls is None:
            bound = server.add_insecure_port(address)
        else:
            bound = server.add_secure_port(address, _credentials(settings))
    except RuntimeError as exc:
        bound, reason = 0, str(exc)
    else:
        reason = "bind failed"
    if not bound:
        raise MmaasError(
            f"cannot listen on {address} (MMAAS_GRPC_PORT): {reason}; "
            "is another server using the port?"
        )
    return server


def _credentials(settings: Settings) -> grpc.ServerCredentials:
    tls = settings.tls
    assert tls is not None
    client_ca = tls.client_ca.read_bytes() if tls.client_ca else None
    return grpc.ssl_server_credentials(
        [(tls.key.read_bytes(), tls.cert.read_bytes())],
        root_certificates=client_ca,
        require_client_auth=client_ca is not None,
    )
