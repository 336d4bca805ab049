"""Running one decoded request on a served model, and accounting for it: the model's
readiness and message limit, its executor (one answer, or a stream of responses), its
statistics, the request's log line, and the one mapping from an error to the status it is
answered with (:func:`failure_of`). The data plane (:mod:`mmaas.server.dataplane`) calls
these for every front end.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from mmaas.core.cuda import on_host
from mmaas.core.errors import InputError
from mmaas.server.repository import ServedModel
from mmaas.server.status import RequestError, ResourceExhausted, Unavailable
from mmaas.server.streaming import Decoupled, Response

REJECTED = {"INVALID_ARGUMENT", "NOT_FOUND", "RESOURCE_EXHAUSTED", "UNAVAILABLE"}
NOT_READY = {
    "loading": "the model is not ready yet: its engine is being verified, loaded and "
    "warmed up; retry when health reports SERVING",
    "draining": "the server is shutting down (SIGTERM); send the request to another replica",
}
log = logging.getLogger("mmaas.server")


@dataclass(frozen=True)
class Failure:
    """How a failed request is answered: the status name (KServe v2 / gRPC), the message,
    and Triton's failure reason for the statistics (``REJECTED``, ``BACKEND``, ``OTHER``)."""

    status: str
    message: str
    reason: str


def failure_of(exc: Exception) -> Failure:
    """The one mapping from an error to its answer: a RequestError keeps its status, an
    InputError (a value an engine refuses) is INVALID_ARGUMENT, anything else INTERNAL,
    an engine failure."""
    if isinstance(exc, RequestError):
        reason = "REJECTED" if exc.status in REJECTED else "OTHER"
        return Failure(exc.status, exc.message, reason)
    if isinstance(exc, InputError):
        return Failure("INVALID_ARGUMENT", exc.message, "REJECTED")
    return Failure("INTERNAL", f"the engine failed on this request: {exc}", "BACKEND")


def check_ready(model: ServedModel) -> None:
    """Raise Unavailable, saying why, unless ``model`` takes requests."""
    if not model.ready:
        raise Unavailable(NOT_READY.get(model.state, NOT_READY["loading"]))


def check_size(model: ServedModel, what: str, size: int) -> None:
    """Raise ResourceExhausted when a message of ``size`` bytes is over ``model``'s limit."""
    limit = model.message_limit
    if size > limit:
        raise ResourceExhausted(
            f"{what} is {size} bytes, over the server's limit of {limit} bytes "
            "(MMAAS_MAX_MESSAGE_SIZE; set it, or runtime.max_message_size in model.yaml "
            "and rebuild, to raise it), or send smaller batches"
        )


async def run(
    model: ServedModel,
    arrays: Mapping[str, np.ndarray],
    outputs: Sequence[str],
    deadline_s: float | None,
) -> dict[str, np.ndarray]:
    """Hand checked, decoded inputs to ``model``'s executor (``deadline_s``: seconds the
    client still waits, or None) and return the named outputs.

    Raises:
        Unavailable, ResourceExhausted (the response over the limit), DeadlineExceeded,
        InputError, the engine's error.
    """
    executor = model.executor
    check_ready(model)
    assert executor is not None  # a ready model has one
    results = await executor.infer(_for(executor, arrays), list(outputs), deadline_s)
    check_size(model, "response", sum(array.nbytes for array in results.values()))
    return results


async def responses(
    model: ServedModel,
    arrays: Mapping[str, np.ndarray],
    outputs: Sequence[str],
    deadline_s: float | None,
) -> AsyncGenerator[Response, None]:
    """Every response to one request (:mod:`mmaas.server.streaming`): one final response
    for an ordinary model (its :func:`run`), each response of a decoupled one; the last one
    yielded is always ``final`` (an empty one is added when the executor's iterator ends
    without one). Close it (``aclose``) to cancel.

    Raises:
        as :func:`run`; a decoupled executor's error also after some responses.
    """
    executor = model.executor
    if not isinstance(executor, Decoupled):
        yield Response(await run(model, arrays, outputs, deadline_s), final=True)
        return
    check_ready(model)
    stream = executor.responses(_for(executor, arrays), list(outputs), deadline_s)
    async with aclosing(stream) as answers:
        async for response in answers:
            check_size(model, "response", sum(a.nbytes for a in response.outputs.values()))
            yield response
            if response.final:
                return
    yield Response(final=True)


@asynccontextmanager
async def accounted(model: ServedModel, request_id: str = "") -> AsyncIterator[Outcome]:
    """Count one request in ``model``'s statistics and log its outcome; the block names
    the request (``outcome.request_id``) once it is read, if ``request_id`` does not, and
    reports a failure with :meth:`Outcome.failed`. A request cancelled (the client left,
    its stream closed) counts as ``CANCELED``."""
    started = time.perf_counter_ns()
    model.metrics.request_started()
    outcome = Outcome(request_id, model.name)
    try:
        yield outcome
    except (asyncio.CancelledError, GeneratorExit):
        outcome.reason = "CANCELED"
        raise
    finally:
        duration_ns = time.perf_counter_ns() - started
        model.metrics.request_finished(duration_ns, outcome.reason)
        if outcome.reason is None and log.isEnabledFor(logging.DEBUG):
            log.debug(
                "request served",
                extra={
                    "request_id": outcome.request_id or uuid.uuid4().hex,
                    "model": model.name,
                    "status": "OK",
                    "duration_ms": round(duration_ns / 1e6, 3),
                },
            )


class Outcome:
    """How one accounted request ended: ``reason`` stays None for a success."""

    def __init__(self, request_id: str, model: str = "") -> None:
        self.request_id = request_id
        self.model = model
        self.reason: str | None = None

    def failed(self, exc: Exception) -> Failure:
        """Record and log the failure ``exc`` (with its traceback when the engine failed);
        return how to answer it."""
        failure = failure_of(exc)
        self.reason = failure.reason
        log.log(
            logging.ERROR if failure.reason == "BACKEND" else logging.INFO,
            "request failed: %s: %s",
            failure.status,
            failure.message,
            exc_info=exc if failure.reason == "BACKEND" else None,
            extra={
                "request_id": self.request_id or "-",
                "model": self.model or "-",
                "status": failure.status,
            },
        )
        return failure


def _for(executor: object, arrays: Mapping[str, Any]) -> dict[str, Any]:
    """``arrays`` as ``executor`` takes them: device arrays (CUDA shared memory inputs)
    stay in device memory only for an executor that says it takes them
    (``device_inputs``, the batcher over GPU instances), else they are copied to the host."""
    if getattr(executor, "device_inputs", False):
        return dict(arrays)
    return on_host(arrays)
