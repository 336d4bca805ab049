"""The KServe v2 ``inference.GRPCInferenceService`` (Triton's ``grpc_service.proto``, the
stubs ``tritonclient.grpc.service_pb2(_grpc)``), so unmodified ``tritonclient.grpc`` works.

Methods are thin: look up the model, convert at the edge (:mod:`.converters`), check
against the signature (:mod:`.signature`), queue on the scheduler (:mod:`.batcher`),
convert back. Every error becomes a gRPC status in one place, :func:`status_of`.
ServerLive, ServerReady, ModelReady, ServerMetadata, ModelMetadata, ModelInfer,
ModelConfig and ModelStatistics are served; the other RPCs answer UNIMPLEMENTED.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import grpc
from tritonclient.grpc import service_pb2, service_pb2_grpc

import mmaas
from mmaas.core.errors import InputError
from mmaas.core.manifest import ModelInfo
from mmaas.server import config
from mmaas.server.batcher import Scheduler
from mmaas.server.converters import from_outputs, to_inputs
from mmaas.server.metrics import ModelMetrics
from mmaas.server.signature import check_inputs, resolve_outputs
from mmaas.server.status import (
    InvalidArgument,
    NotFound,
    RequestError,
    ResourceExhausted,
    Unavailable,
)

SERVICE = "inference.GRPCInferenceService"
REJECTED = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.UNAVAILABLE,
}
NOT_READY = {
    "loading": "the model is not ready yet: its engine is being verified, loaded and "
    "warmed up; retry when health reports SERVING",
    "draining": "the server is shutting down (SIGTERM); send the request to another replica",
}
UNSUPPORTED_PARAMETERS = {
    "classification": "the classification extension is not supported; request the tensor",
    "shared_memory_region": "shared memory is not supported; send the data in the request",
}
log = logging.getLogger("mmaas.server")


class SizedRequest(NamedTuple):
    """A ModelInferRequest with its size on the wire in bytes (read before parsing)."""

    message: Any
    size: int

    @classmethod
    def parse(cls, data: bytes) -> SizedRequest:
        """gRPC request deserializer for ModelInfer."""
        return cls(service_pb2.ModelInferRequest.FromString(data), len(data))


@dataclass
class ServedModel:
    """What the servicer serves: the signature, the message limit in bytes, statistics, the
    model config facts, the scheduler (set when loaded) and the ``state``: ``loading``,
    then ``ready`` (health SERVING), then ``draining`` after SIGTERM."""

    info: ModelInfo
    message_limit: int
    metrics: ModelMetrics
    config: config.ConfigFacts
    scheduler: Scheduler | None = None
    state: str = "loading"

    @property
    def ready(self) -> bool:
        """True while requests are taken (KServe v2 ServerReady / ModelReady)."""
        return self.state == "ready"


def status_of(exc: Exception) -> tuple[grpc.StatusCode, str, str]:
    """The one mapping from an error to (gRPC status, message, Triton failure reason)."""
    if isinstance(exc, RequestError):
        return exc.code, exc.message, "REJECTED" if exc.code in REJECTED else "OTHER"
    if isinstance(exc, InputError):
        return grpc.StatusCode.INVALID_ARGUMENT, exc.message, "REJECTED"
    return grpc.StatusCode.INTERNAL, f"the engine failed on this request: {exc}", "BACKEND"


class InferenceServicer(service_pb2_grpc.GRPCInferenceServiceServicer):
    """KServe v2 gRPC methods over one :class:`ServedModel`."""

    def __init__(self, model: ServedModel) -> None:
        self.model = model

    async def ServerLive(self, request: Any, context: Any) -> Any:
        """Live as soon as the process answers (Kubernetes liveness)."""
        return service_pb2.ServerLiveResponse(live=True)

    async def ServerReady(self, request: Any, context: Any) -> Any:
        """Ready once the engine is verified, loaded and warmed up (= health SERVING)."""
        return service_pb2.ServerReadyResponse(ready=self.model.ready)

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
        """Triton's model configuration of the served model (see :mod:`.config`)."""
        return await _answer(context, self._config, request)

    async def ModelStatistics(self, request: Any, context: Any) -> Any:
        """Triton's cumulative inference statistics (see :mod:`.metrics`)."""
        return await _answer(context, self._statistics, request)

    async def ModelInfer(self, request: SizedRequest, context: Any) -> Any:
        """Run one inference. ``request`` comes from :meth:`SizedRequest.parse`
        (registered by :func:`register`). Outputs are returned in ``raw_output_contents``."""
        started = time.perf_counter_ns()
        metrics = self.model.metrics
        metrics.request_started()
        failure: str | None = None
        try:
            return await self._infer(request.message, request.size, context)
        except asyncio.CancelledError:
            failure = "CANCELED"
            raise
        except Exception as exc:
            code, message, failure = status_of(exc)
            log.log(
                logging.ERROR if failure == "BACKEND" else logging.INFO,
                "request failed: %s: %s",
                code.name,
                message,
                exc_info=failure == "BACKEND",
                extra={"request_id": request.message.id or "-", "status": code.name},
            )
            await context.abort(code, message)
        finally:
            duration_ns = time.perf_counter_ns() - started
            metrics.request_finished(duration_ns, failure)
            if failure is None and log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "request served",
                    extra={
                        "request_id": request.message.id or uuid.uuid4().hex,
                        "status": "OK",
                        "duration_ms": round(duration_ns / 1e6, 3),
                    },
                )

    async def _infer(self, request: Any, size: int, context: Any) -> Any:
        info = self._lookup(request.model_name, request.model_version)
        scheduler = self.model.scheduler
        if scheduler is None or not self.model.ready:
            raise Unavailable(NOT_READY[self.model.state])
        self._check_size("request", size)
        check_inputs(info, [(t.name, t.datatype, t.shape) for t in request.inputs])
        _check_parameters("inputs", request.inputs)
        _check_parameters("outputs", request.outputs)
        outputs = resolve_outputs(info, [output.name for output in request.outputs])
        arrays = to_inputs(request.inputs, request.raw_input_contents)
        results = await scheduler.infer(arrays, outputs, context.time_remaining())
        self._check_size("response", sum(array.nbytes for array in results.values()))
        response = service_pb2.ModelInferResponse(
            model_name=info.name, model_version=info.version, id=request.id
        )
        from_outputs(response, results)
        return response

    def _check_size(self, what: str, size: int) -> None:
        limit = self.model.message_limit
        if size > limit:
            raise ResourceExhausted(
                f"{what} is {size} bytes, over the server's limit of {limit} bytes "
                "(MMAAS_MAX_MESSAGE_SIZE; set it, or runtime.max_message_size in model.yaml "
                "and rebuild, to raise it), or send smaller batches"
            )

    def _lookup(self, name: str, version: str) -> ModelInfo:
        info = self.model.info
        if name != info.name:
            raise NotFound(
                f"unknown model {name!r} in model_name; this server serves "
                f"{info.name!r} (version {info.version!r})"
            )
        if version not in ("", info.version):
            raise NotFound(
                f"model {name!r} has no version {version!r} (model_version); "
                f"it serves version {info.version!r}, or leave model_version empty"
            )
        return info

    async def _model_ready(self, request: Any) -> Any:
        self._lookup(request.name, request.version)
        return service_pb2.ModelReadyResponse(ready=self.model.ready)

    async def _metadata(self, request: Any) -> Any:
        info = self._lookup(request.name, request.version)
        return config.to_metadata(info)

    async def _config(self, request: Any) -> Any:
        info = self._lookup(request.name, request.version)
        return service_pb2.ModelConfigResponse(
            config=config.to_model_config(info, self.model.config)
        )

    async def _statistics(self, request: Any) -> Any:
        if request.name:
            self._lookup(request.name, request.version)
        return config.to_statistics(self.model.info, self.model.metrics.snapshot())


def register(servicer: InferenceServicer, server: grpc.aio.Server) -> None:
    """Add the service to ``server``; ModelInfer is bound first with
    :meth:`SizedRequest.parse` so its size is known before it is parsed."""
    infer = grpc.unary_unary_rpc_method_handler(
        servicer.ModelInfer,
        request_deserializer=SizedRequest.parse,
        response_serializer=service_pb2.ModelInferResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE, {"ModelInfer": infer}),)
    )
    service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(servicer, server)


async def _answer(context: Any, method: Any, request: Any) -> Any:
    try:
        return await method(request)
    except RequestError as exc:
        code, message, _ = status_of(exc)
        await context.abort(code, message)


def _check_parameters(field: str, tensors: Sequence[Any]) -> None:
    for tensor in tensors:
        for key, why in UNSUPPORTED_PARAMETERS.items():
            if key in tensor.parameters:
                raise InvalidArgument(f"{field} {tensor.name!r}: parameter {key!r}: {why}")
