"""``ModelStreamInfer``: KServe v2 / Triton's bidirectional streaming inference RPC.

Every request on the stream runs as its own task (the batcher may stack requests of one
stream), and its responses go back as they come: one for an ordinary model, every
response of a decoupled one (:mod:`mmaas.server.streaming`), each with the request's
``id`` and ``parameters["triton_final_response"]``. An empty final response is sent only
when the request set ``triton_enable_empty_final_response`` (Triton's rule,
``src/grpc/stream_infer_handler.cc``). A failed request gets one response with
``error_message`` and its ``id`` (and model name/version), and the stream goes on (C26).
When the client half-closes, the stream ends once every request is answered; when it
cancels, every request still running is cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from mmaas.server.grpc.protocol import grpc_service_pb2 as service_pb2
from mmaas.server.inference import failure_of
from mmaas.server.status import InvalidArgument, RequestError
from mmaas.server.streaming import Response

EMPTY_FINAL = "triton_enable_empty_final_response"
FINAL = "triton_final_response"
_END = object()


async def stream_infer(servicer: Any, requests: AsyncIterator[Any], context: Any) -> Any:
    """The RPC's handler (an async generator of ModelStreamInferResponse): ``servicer`` is
    the :class:`~mmaas.server.grpc.servicer.InferenceServicer`, ``requests`` the stream of
    :class:`~mmaas.server.grpc.servicer.SizedRequest`."""
    queue: asyncio.Queue[Any] = asyncio.Queue()
    reader = asyncio.ensure_future(_read(servicer, requests, queue, context))
    try:
        while (item := await queue.get()) is not _END:
            yield item
        await reader  # re-raise what ended the reading, if anything
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader


async def _read(servicer: Any, requests: AsyncIterator[Any], queue: Any, context: Any) -> None:
    tasks: set[asyncio.Task[None]] = set()
    try:
        async for request in requests:
            task = asyncio.ensure_future(_answer(servicer, request, queue, context))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        queue.put_nowait(_END)


async def _answer(servicer: Any, sized: Any, queue: Any, context: Any) -> None:
    """Answer one request of the stream: its responses, or one error response."""
    request = sized.message
    path = servicer.path
    try:
        model = path.lookup(request.model_name, request.model_version)
    except RequestError as exc:  # an unknown model has no statistics to count it in
        queue.put_nowait(_error(request, failure_of(exc).message, request.model_name, ""))
        return
    async with path.accounted(model, request.id) as outcome:
        try:
            decoded, outputs = servicer.decode(model, sized)
            empty_final = _empty_final_wanted(decoded.parameters)
            if decoded.output_refs and servicer.is_decoupled(model):
                raise InvalidArgument(
                    "outputs of a decoupled model cannot go to shared memory (each response "
                    "would overwrite the last); drop shared_memory_region from the outputs"
                )
            responses = path.stream(model, decoded.arrays, outputs, context.time_remaining())
            async with contextlib.aclosing(responses) as stream:
                async for response in stream:
                    if response.outputs or not response.final or empty_final:
                        queue.put_nowait(_response(servicer, model, request, decoded, response))
        except Exception as exc:
            failure = outcome.failed(exc)
            queue.put_nowait(_error(request, failure.message, model.name, model.version))


def _response(servicer: Any, model: Any, request: Any, decoded: Any, response: Response) -> Any:
    message = servicer.infer_response(model, request.id, response.outputs, decoded.output_refs)
    message.parameters[FINAL].bool_param = response.final
    return service_pb2.ModelStreamInferResponse(infer_response=message)


def _error(request: Any, message: str, model_name: str, model_version: str) -> Any:
    return service_pb2.ModelStreamInferResponse(
        error_message=message,
        infer_response=service_pb2.ModelInferResponse(
            id=request.id, model_name=model_name, model_version=model_version
        ),
    )


def _empty_final_wanted(parameters: dict[str, Any]) -> bool:
    value = parameters.get(EMPTY_FINAL, False)
    if not isinstance(value, bool):
        raise InvalidArgument(
            f"invalid value type for {EMPTY_FINAL!r} parameter, expected bool_param"
        )
    return value
