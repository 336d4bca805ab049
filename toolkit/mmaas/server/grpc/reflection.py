"""gRPC server reflection, both versions: ``grpc.reflection.v1.ServerReflection`` (what
grpcurl >= 1.8.8, Postman and current gRPC tools ask first) and the older
``grpc.reflection.v1alpha.ServerReflection``.

grpcio-reflection ships only v1alpha. The two protocols are the same messages under two
package names (``grpc/reflection/v1/reflection.proto`` is v1alpha's file renamed), so the
v1 service reuses v1alpha's servicer and message classes: identical bytes on the wire.
The v1 file descriptor is v1alpha's with its package renamed, added to the default pool
so that reflection can describe itself in both versions.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection, reflection_pb2

V1ALPHA = "grpc.reflection.v1alpha"
V1 = "grpc.reflection.v1"
V1_SERVICE = f"{V1}.ServerReflection"


def enable_reflection(service_names: Iterable[str], server: Any) -> None:
    """Serve reflection v1 and v1alpha on ``server`` (a ``grpc.aio.Server``) for
    ``service_names`` plus both reflection services themselves."""
    _add_v1_descriptor()
    names = (*service_names, reflection.SERVICE_NAME, V1_SERVICE)
    servicer = reflection.aio.ReflectionServicer(names)
    handler = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        tuple(
            grpc.method_handlers_generic_handler(name, {"ServerReflectionInfo": handler})
            for name in (reflection.SERVICE_NAME, V1_SERVICE)
        )
    )


def _add_v1_descriptor() -> None:
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName("grpc/reflection/v1/reflection.proto")
        return
    except KeyError:
        pass
    proto = descriptor_pb2.FileDescriptorProto.FromString(reflection_pb2.DESCRIPTOR.serialized_pb)
    proto.name = "grpc/reflection/v1/reflection.proto"
    proto.package = V1
    old, new = f".{V1ALPHA}.", f".{V1}."
    for message in proto.message_type:
        for field in message.field:
            if field.HasField("type_name"):
                field.type_name = field.type_name.replace(old, new)
    for service in proto.service:
        for method in service.method:
            method.input_type = method.input_type.replace(old, new)
            method.output_type = method.output_type.replace(old, new)
    proto.options.Clear()
    pool.Add(proto)
