"""``ModelStreamInfer``: KServe v2 / Triton's bidirectional streaming inference RPC.

Every request on the stream runs as its own task (the batcher may stack requests of one
stream) through the data plane's stream of responses
(:meth:`mmaas.server.dataplane.DataPlane.stream`), and its responses go back as they
come: one for an ordinary model, every response of a decoupled one
(:mod:`mmaas.server.streaming`), each with the request's ``id`` and
``parameters["triton_final_response"]``. An empty final response is sent only when the
request set ``triton_enable_empty_final_response`` (Triton's rule,
``src/grpc/stream_infer_handler.cc``). A failed request gets one response with
``error_message`` and its ``id`` (and model name/version), and the stream goes on: one bad
request never ends the others. When the client half-closes, the stream ends once every
request is answered; when it cancels, every request still running is cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from mmaas.server.dataplane import DataPlane, Failed
from mmaas.server.grpc.converters import MessageExchange, from_response, to_parameters
from mmaas.server.protocol.stubs import grpc_service_pb2 as service_pb2
from mmaas.server.protocol.types import InferRequest, InferResponse
from mmaas.server.repository import ServedModel
from mmaas.server.status import InvalidArgument

EMPTY_FINAL = "triton_enable_empty_final_response"
FINAL = "triton_final_response"
_END = object()


class StreamExchange(MessageExchange):
    """A request of the stream: read as a ModelInferRequest (with Triton's empty final
    response wish), each response written as a ModelStreamInferResponse."""

    empty_final = False

    async def read(self, model: ServedModel) -> InferRequest:
        """The request, and whether it wants an empty final response.

        Raises:
            InvalidArgument: ``triton_enable_empty_final_response`` is not a bool_param.
        """
        value = to_parameters(self.message.parameters).get(EMPTY_FINAL, False)
        if not isinstance(value, bool):
            raise InvalidArgument(
                f"invalid value type for {EMPTY_FINAL!r} parameter, expected bool_param"
            )
        self.empty_final = value
        return await super().read(model)

    def write(self, model: ServedModel, request: InferRequest, response: InferResponse) -> Any:
        """The ModelStreamInferResponse of ``response`` with ``triton_final_response``."""
        message = from_response(response)
        message.parameters[FINAL].bool_param = response.final
        return service_pb2.ModelStreamInferResponse(infer_response=message)

    def sends(self, response: Any) -> bool:
        """False for the empty final response the request did not ask for."""
        infer = response.infer_response
        return bool(infer.outputs) or not infer.parameters[FINAL].bool_param or self.empty_final


async def stream_infer(plane: DataPlane, requests: AsyncIterator[Any], context: Any) -> Any:
    """The RPC's handler (an async generator of ModelStreamInferResponse) over ``plane``;
    ``requests`` is the stream of :class:`~mmaas.server.grpc.servicer.SizedRequest`."""
    queue: asyncio.Queue[Any] = asyncio.Queue()
    reader = asyncio.ensure_future(_read(plane, requests, queue, context))
    try:
        while (item := await queue.get()) is not _END:
            yield item
        await reader  # re-raise what ended the reading, if anything
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader


async def _read(plane: DataPlane, requests: AsyncIterator[Any], queue: Any, context: Any) -> None:
    tasks: set[asyncio.Task[None]] = set()
    try:
        async for request in requests:
            task = asyncio.ensure_future(_answer(plane, request, queue, context))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        queue.put_nowait(_END)


async def _answer(plane: DataPlane, sized: Any, queue: Any, context: Any) -> None:
    """Answer one request of the stream: its responses, or one error response."""
    request = sized.message
    exchange = StreamExchange(request, sized.size)
    deadline_s = context.time_remaining()
    try:
        responses = plane.stream(
            request.model_name, request.model_version, exchange, deadline_s, request.id
        )
        async with contextlib.aclosing(responses) as stream:
            async for response in stream:
                if exchange.sends(response):
                    queue.put_nowait(response)
    except Failed as failed:
        model = failed.model
        name, version = (model.name, model.version) if model else (request.model_name, "")
        queue.put_nowait(
            service_pb2.ModelStreamInferResponse(
                error_message=failed.failure.message,
                infer_response=service_pb2.ModelInferResponse(
                    id=request.id, model_name=name, model_version=version
                ),
            )
        )
