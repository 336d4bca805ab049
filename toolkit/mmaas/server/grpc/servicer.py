"""The KServe v2 ``inference.GRPCInferenceService`` (Triton's ``grpc_service.proto``, the
stubs generated at build time into :mod:`mmaas.server.protocol.stubs`), so unmodified
``tritonclient.grpc`` works: health, metadata, config, statistics, ModelInfer,
ModelStreamInfer (:mod:`.stream`) and the model repository extension here; shared memory,
log and trace settings in :mod:`.extensions`; every RPC bound by :mod:`.handlers`.

Methods are thin: translate at the edge (:mod:`.converters`), call the one request path
(:class:`mmaas.server.dataplane.DataPlane`: the model's lookup, checks, decoding, its
executor, its statistics), translate back; a failure's status name becomes the gRPC
status (:func:`abort`).
"""

from __future__ import annotations

from contextlib import aclosing
from typing import Any, NamedTuple

import grpc

from mmaas.server.context import ServerContext
from mmaas.server.dataplane import Failed
from mmaas.server.grpc.converters import MessageExchange
from mmaas.server.grpc.stream import stream_infer
from mmaas.server.inference import Failure
from mmaas.server.protocol import messages
from mmaas.server.protocol.stubs import grpc_service_pb2 as service_pb2
from mmaas.server.status import Unsupported

SERVICE = "inference.GRPCInferenceService"


class SizedRequest(NamedTuple):
    """A ModelInferRequest with its size on the wire in bytes (read before parsing)."""

    message: Any
    size: int

    @classmethod
    def parse(cls, data: bytes) -> SizedRequest:
        """gRPC request deserializer for ModelInfer and ModelStreamInfer."""
        return cls(service_pb2.ModelInferRequest.FromString(data), len(data))


class InferenceServicer:
    """KServe v2 gRPC methods over the server's repository, its system shared memory
    registry and its model control (:class:`~mmaas.server.context.ServerContext`)."""

    def __init__(self, context: ServerContext) -> None:
        self.repository = context.repository
        self.plane = context.plane
        self.control = context.control

    async def ServerLive(self, request: Any) -> Any:
        """Live as soon as the process answers (Kubernetes liveness)."""
        return service_pb2.ServerLiveResponse(live=True)

    async def ServerReady(self, request: Any) -> Any:
        """Ready once every model's engines are verified, loaded and warmed up (= health
        SERVING); not ready from SIGTERM on."""
        return service_pb2.ServerReadyResponse(ready=self.repository.ready)

    async def ModelReady(self, request: Any) -> Any:
        """Readiness of the named model; NOT_FOUND for another name or version."""
        model = self.plane.lookup(request.name, request.version)
        return service_pb2.ModelReadyResponse(ready=model.ready)

    async def ServerMetadata(self, request: Any) -> Any:
        """Server name ``mmaas``, its version and the KServe v2 extensions it speaks
        (:func:`~mmaas.server.protocol.messages.to_server_metadata`)."""
        return messages.to_server_metadata()

    async def ModelMetadata(self, request: Any) -> Any:
        """Names, datatypes and shapes (-1 = dynamic, batch axis included), and the
        version it reports."""
        model = self.plane.lookup(request.name, request.version)
        return messages.to_metadata(model)

    async def ModelConfig(self, request: Any) -> Any:
        """Triton's model configuration of the named model
        (:func:`~mmaas.server.protocol.messages.to_model_config`)."""
        model = self.plane.lookup(request.name, request.version)
        return service_pb2.ModelConfigResponse(config=messages.to_model_config(model))

    async def ModelStatistics(self, request: Any) -> Any:
        """Triton's cumulative inference statistics of the named model, or of every model
        when the name is empty (see :mod:`mmaas.server.metrics`)."""
        if request.name:
            models = [self.plane.lookup(request.name, request.version)]
        else:
            models = list(self.repository)
        return messages.to_statistics(models)

    async def ModelInfer(self, request: SizedRequest, context: Any) -> Any:
        """Run one inference; outputs in ``raw_output_contents`` or shared memory.
        ``request`` comes from :meth:`SizedRequest.parse`."""
        message = request.message
        exchange = MessageExchange(message, request.size)
        try:
            return await self.plane.infer(
                message.model_name,
                message.model_version,
                exchange,
                context.time_remaining(),
                message.id,
            )
        except Failed as failed:
            await abort(context, failed.failure)

    async def ModelStreamInfer(self, requests: Any, context: Any) -> Any:
        """Bidirectional streaming inference (see :mod:`.stream`)."""
        async with aclosing(stream_infer(self.plane, requests, context)) as responses:
            async for response in responses:
                yield response

    async def RepositoryIndex(self, request: Any) -> Any:
        """Every served model with its state (only ready ones when ``ready``)."""
        _no_repository_name(request)
        return service_pb2.RepositoryIndexResponse(
            models=[
                service_pb2.RepositoryIndexResponse.ModelIndex(
                    name=e.name, version=e.version, state=e.state, reason=e.reason
                )
                for e in self.control.index(request.ready)
            ]
        )

    async def RepositoryModelLoad(self, request: Any) -> Any:
        """(Re)load a served model: verify, load and warm up its engines."""
        _no_repository_name(request)
        await self.control.load(request.model_name, _repository_parameters(request))
        return service_pb2.RepositoryModelLoadResponse()

    async def RepositoryModelUnload(self, request: Any) -> Any:
        """Unload a served model (requests get UNAVAILABLE until it is loaded again)."""
        _no_repository_name(request)
        await self.control.unload(request.model_name, _repository_parameters(request))
        return service_pb2.RepositoryModelUnloadResponse()


async def abort(context: Any, failure: Failure) -> None:
    """End the RPC with ``failure`` (``context.abort`` raises). The gRPC front end's error
    table is the status enum itself: every request-path status is named after its gRPC
    code (:mod:`mmaas.server.status`)."""
    await context.abort(grpc.StatusCode[failure.status], failure.message)


def _no_repository_name(request: Any) -> None:
    if request.repository_name:
        raise Unsupported(
            f"'repository_name' specification is not supported (got "
            f"{request.repository_name!r}): this server has one model repository, its image's"
        )


def _repository_parameters(request: Any) -> dict[str, object]:
    return {
        key: getattr(value, value.WhichOneof("parameter_choice"))
        for key, value in request.parameters.items()
        if value.WhichOneof("parameter_choice")
    }
