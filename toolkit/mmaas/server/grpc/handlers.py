"""Every RPC of ``inference.GRPCInferenceService`` bound to its method: the inference,
metadata and repository RPCs of :class:`~.servicer.InferenceServicer`, the shared memory,
log and trace RPCs of :class:`~.extensions.Extensions`. ModelInfer and ModelStreamInfer
parse with :meth:`~.servicer.SizedRequest.parse` (the size is known before parsing); the
other methods get the parsed request, and a :class:`~mmaas.server.status.RequestError`
they raise is answered with its status and message. No RPC answers a bare UNIMPLEMENTED.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from mmaas.server.grpc.extensions import Extensions
from mmaas.server.grpc.servicer import SERVICE, InferenceServicer, SizedRequest, abort
from mmaas.server.inference import failure_of
from mmaas.server.protocol.stubs import grpc_service_pb2 as service_pb2
from mmaas.server.status import RequestError


def register(servicer: InferenceServicer, extensions: Extensions, server: Any) -> None:
    """Add every method of the service to ``server`` (a ``grpc.aio.Server``).

    Raises:
        AttributeError: the protocol has an RPC that nothing here serves (a newer proto).
    """
    methods = service_pb2.DESCRIPTOR.services_by_name["GRPCInferenceService"].methods
    handlers: dict[str, Any] = {}
    for method in methods:
        owner = extensions if hasattr(extensions, method.name) else servicer
        call = getattr(owner, method.name)
        if method.name == "ModelInfer":
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                call, request_deserializer=SizedRequest.parse, response_serializer=_serialize
            )
        elif method.name == "ModelStreamInfer":
            handlers[method.name] = grpc.stream_stream_rpc_method_handler(
                call, request_deserializer=SizedRequest.parse, response_serializer=_serialize
            )
        else:
            parse = getattr(service_pb2, method.input_type.name).FromString
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                _answering(call), request_deserializer=parse, response_serializer=_serialize
            )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))


def _answering(method: Callable[[Any], Any]) -> Callable[[Any, Any], Any]:
    async def handler(request: Any, context: Any) -> Any:
        try:
            return await method(request)
        except RequestError as exc:
            await abort(context, failure_of(exc))

    handler.__doc__ = method.__doc__
    return handler


def _serialize(message: Any) -> bytes:
    data: bytes = message.SerializeToString()
    return data
