"""The KServe v2 ``inference.GRPCInferenceService`` (Triton's ``grpc_service.proto``, the
stubs generated at build time into :mod:`mmaas.server.grpc.protocol`), so unmodified
``tritonclient.grpc`` works.

Methods are thin: convert at the edge (:mod:`.converters`), call the one request path
(:class:`mmaas.server.inference.InferencePath`: the model's lookup in the repository,
checks, its executor, its statistics), convert back; a failure's status name becomes the
gRPC status. ServerLive, ServerReady, ModelReady, ServerMetadata, ModelMetadata,
ModelInfer, ModelConfig and ModelStatistics are served (:func:`register`); the other RPCs
answer UNIMPLEMENTED.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import grpc

import mmaas
from mmaas.server.grpc import config
from mmaas.server.grpc.converters import from_outputs, to_inputs
from mmaas.server.grpc.protocol import grpc_service_pb2 as service_pb2
from mmaas.server.inference import InferencePath, failure_of
from mmaas.server.repository import Repository, ServedModel
from mmaas.server.status import InvalidArgument, RequestError

SERVICE = "inference.GRPCInferenceService"
UNSUPPORTED_PARAMETERS = {
    "classification": "the classification extension is not supported; request the tensor",
    "shared_memory_region": "shared memory is not supported; send the data in the request",
}


class SizedRequest(NamedTuple):
    """A ModelInferRequest with its size on the wire in bytes (read before parsing)."""

    message: Any
    size: int

    @classmethod
    def parse(cls, data: bytes) -> SizedRequest:
        """gRPC request deserializer for ModelInfer."""
        return cls(service_pb2.ModelInferRequest.FromString(data), len(data))


class InferenceServicer:
    """KServe v2 gRPC methods over a :class:`~mmaas.server.repository.Repository`."""

    def __init__(self, repository: Repository) -> None:
        self.repository = repository
        self.path = InferencePath(repository)

    async def ServerLive(self, request: Any, context: Any) -> Any:
        """Live as soon as the process answers (Kubernetes liveness)."""
        return service_pb2.ServerLiveResponse(live=True)

    async def ServerReady(self, request: Any, context: Any) -> Any:
        """Ready once every model's engines are verified, loaded and warmed up (= health
        SERVING)."""
        return service_pb2.ServerReadyResponse(ready=self.repository.ready)

    async def ModelReady(self, request: Any, context: Any) -> Any:
        """Readiness of the named model; NOT_FOUND for another name or version."""
        return await _answer(context, self._model_ready, request)

    async def ServerMetadata(self, request: Any, context: Any) -> Any:
        """Server name ``mmaas``, its version and the KServe v2 extensions it speaks."""
        return service_pb2.ServerMetadataResponse(
            name="mmaas",
            version=mmaas.__version__,
            extensions=["model_configuration", "statistics"],
        )

    async def ModelMetadata(self, request: Any, context: Any) -> Any:
        """Names, datatypes and shapes (-1 = dynamic, batch axis included)."""
        return await _answer(context, self._metadata, request)

    async def ModelConfig(self, request: Any, context: Any) -> Any:
        """Triton's model configuration of the named model (see :mod:`.config`)."""
        return await _answer(context, self._config, request)

    async def ModelStatistics(self, request: Any, context: Any) -> Any:
        """Triton's cumulative inference statistics of the named model, or of every model
        when the name is empty (see :mod:`.metrics`)."""
        return await _answer(context, self._statistics, request)

    async def ModelInfer(self, request: SizedRequest, context: Any) -> Any:
        """Run one inference. ``request`` comes from :meth:`SizedRequest.parse`
        (registered by :func:`register`). Outputs are returned in ``raw_output_contents``."""
        message = request.message
        try:
            model = self.path.lookup(message.model_name, message.model_version)
        except RequestError as exc:  # an unknown model has no statistics to count it in
            await context.abort(grpc.StatusCode[exc.status], exc.message)
        async with self.path.accounted(model, message.id) as outcome:
            try:
                return await self._infer(model, message, request.size, context)
            except Exception as exc:
                failure = outcome.failed(exc)
                await context.abort(grpc.StatusCode[failure.status], failure.message)

    async def _infer(self, model: ServedModel, request: Any, size: int, context: Any) -> Any:
        headers = [(t.name, t.datatype, t.shape) for t in request.inputs]
        requested = [output.name for output in request.outputs]
        outputs = self.path.admit(model, size, headers, requested)
        _check_parameters("inputs", request.inputs)
        _check_parameters("outputs", request.outputs)
        arrays = to_inputs(request.inputs, request.raw_input_contents)
        results = await self.path.run(model, arrays, outputs, context.time_remaining())
        response = service_pb2.ModelInferResponse(
            model_name=model.name, model_version=model.version, id=request.id
        )
        from_outputs(response, results)
        return response

    async def _model_ready(self, request: Any) -> Any:
        model = self.path.lookup(request.name, request.version)
        return service_pb2.ModelReadyResponse(ready=model.ready)

    async def _metadata(self, request: Any) -> Any:
        model = self.path.lookup(request.name, request.version)
        return config.to_metadata(model.info, model.config)

    async def _config(self, request: Any) -> Any:
        model = self.path.lookup(request.name, request.version)
        return service_pb2.ModelConfigResponse(
            config=config.to_model_config(model.info, model.config)
        )

    async def _statistics(self, request: Any) -> Any:
        if request.name:
            models = [self.path.lookup(request.name, request.version)]
        else:
            models = list(self.repository)
        return config.to_statistics([(m.info, m.metrics.snapshot()) for m in models])


def register(servicer: InferenceServicer, server: grpc.aio.Server) -> None:
    """Add the served methods of the service to ``server`` (ModelInfer bound with
    :meth:`SizedRequest.parse`, so its size is known before it is parsed); every other
    method of the service answers UNIMPLEMENTED."""
    served: dict[str, tuple[Any, Any]] = {
        "ServerLive": (servicer.ServerLive, service_pb2.ServerLiveRequest.FromString),
        "ServerReady": (servicer.ServerReady, service_pb2.ServerReadyRequest.FromString),
        "ModelReady": (servicer.ModelReady, service_pb2.ModelReadyRequest.FromString),
        "ServerMetadata": (servicer.ServerMetadata, service_pb2.ServerMetadataRequest.FromString),
        "ModelMetadata": (servicer.ModelMetadata, service_pb2.ModelMetadataRequest.FromString),
        "ModelConfig": (servicer.ModelConfig, service_pb2.ModelConfigRequest.FromString),
        "ModelStatistics": (
            servicer.ModelStatistics,
            service_pb2.ModelStatisticsRequest.FromString,
        ),
        "ModelInfer": (servicer.ModelInfer, SizedRequest.parse),
    }
    handlers = {
        name: grpc.unary_unary_rpc_method_handler(
            method, request_deserializer=parse, response_serializer=_serialize
        )
        for name, (method, parse) in served.items()
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))


def _serialize(message: Any) -> bytes:
    data: bytes = message.SerializeToString()
    return data


async def _answer(context: Any, method: Any, request: Any) -> Any:
    try:
        return await method(request)
    except RequestError as exc:
        failure = failure_of(exc)
        await context.abort(grpc.StatusCode[failure.status], failure.message)


def _check_parameters(field: str, tensors: Sequence[Any]) -> None:
    for tensor in tensors:
        for key, why in UNSUPPORTED_PARAMETERS.items():
            if key in tensor.parameters:
                raise InvalidArgument(f"{field} {tensor.name!r}: parameter {key!r}: {why}")
