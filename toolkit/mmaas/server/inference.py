"""The one request path behind every front end: look the model up in the repository,
check the request against that model's signature, hand it to the model's executor, check
the response, and account for it in that model's statistics. Protocol-neutral: a front end
(``mmaas.server.grpc``; an HTTP/REST one beside it) decodes its wire format into names,
datatypes, shapes and numpy arrays, calls :class:`InferencePath`, and encodes the result or
the :class:`Failure` back::

    model = path.lookup(name, version)                 # NotFound
    async with path.accounted(model, request_id) as outcome:
        try:
            outputs = path.admit(model, size, headers, requested)
            results = await path.run(model, arrays, outputs, deadline_s)
        except Exception as exc:
            failure = outcome.failed(exc)              # answer failure.status / .message

Many responses (gRPC ModelStreamInfer, HTTP generate_stream): ``path.stream(model, arrays,
outputs, deadline_s)`` instead of ``run``, an async iterator of
:class:`~mmaas.server.streaming.Response` (one for an ordinary model, the last ``final``).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass

import numpy as np

from mmaas.core.errors import InputError
from mmaas.server.repository import Repository, ServedModel
from mmaas.server.signature import check_inputs, resolve_outputs
from mmaas.server.status import RequestError, ResourceExhausted, Unavailable
from mmaas.server.streaming import Decoupled, Response

REJECTED = {"INVALID_ARGUMENT", "NOT_FOUND", "RESOURCE_EXHAUSTED", "UNAVAILABLE"}
NOT_READY = {
    "loading": "the model is not ready yet: its engine is being verified, loaded and "
    "warmed up; retry when health reports SERVING",
    "draining": "the server is shutting down (SIGTERM); send the request to another replica",
}
log = logging.getLogger("mmaas.server")
Header = tuple[str, str, Sequence[int]]  # (name, datatype, shape) of a request input


@dataclass(frozen=True)
class Failure:
    """How a failed request is answered: the status name (KServe v2 / gRPC), the message,
    and Triton's failure reason for the statistics (``REJECTED``, ``BACKEND``, ``OTHER``)."""

    status: str
    message: str
    reason: str


def failure_of(exc: Exception) -> Failure:
    """The one mapping from an error to its answer."""
    if isinstance(exc, RequestError):
        reason = "REJECTED" if exc.status in REJECTED else "OTHER"
        return Failure(exc.status, exc.message, reason)
    if isinstance(exc, InputError):
        return Failure("INVALID_ARGUMENT", exc.message, "REJECTED")
    return Failure("INTERNAL", f"the engine failed on this request: {exc}", "BACKEND")


class InferencePath:
    """The request path over a :class:`~mmaas.server.repository.Repository` (see the
    module docstring)."""

    def __init__(self, repository: Repository) -> None:
        self.repository = repository

    def lookup(self, name: str, version: str) -> ServedModel:
        """The model ``name`` at ``version`` ("" = its latest).

        Raises:
            NotFound: another model or version (KServe v2 semantics).
        """
        return self.repository.get(name, version)

    def admit(
        self,
        model: ServedModel,
        size: int,
        inputs: Sequence[Header],
        outputs: Sequence[str],
    ) -> list[str]:
        """Check a request for ``model`` before its data is decoded: readiness, its size in
        bytes, its inputs' names, datatypes and shapes; return the outputs to compute.

        Raises:
            Unavailable, ResourceExhausted, InvalidArgument.
        """
        if not model.ready:
            raise Unavailable(NOT_READY.get(model.state, NOT_READY["loading"]))
        check_size(model, "request", size)
        check_inputs(model.info, inputs)
        return resolve_outputs(model.info, outputs)

    async def run(
        self,
        model: ServedModel,
        arrays: Mapping[str, np.ndarray],
        outputs: Sequence[str],
        deadline_s: float | None,
    ) -> dict[str, np.ndarray]:
        """Hand the decoded inputs to ``model``'s executor (``deadline_s``: seconds the
        client still waits, or None) and return the named outputs.

        Raises:
            Unavailable, ResourceExhausted, DeadlineExceeded, InputError, the engine's error.
        """
        executor = model.executor
        if executor is None or not model.ready:
            raise Unavailable(NOT_READY.get(model.state, NOT_READY["loading"]))
        results = await executor.infer(dict(arrays), list(outputs), deadline_s)
        check_size(model, "response", sum(array.nbytes for array in results.values()))
        return results

    async def stream(
        self,
        model: ServedModel,
        arrays: Mapping[str, np.ndarray],
        outputs: Sequence[str],
        deadline_s: float | None,
    ) -> AsyncIterator[Response]:
        """Every response to one request (:mod:`mmaas.server.streaming`): one final
        response for an ordinary model (its :meth:`run`), each response of a decoupled
        one; the last one yielded is always ``final`` (an empty one is added when the
        executor's iterator ends without one). Close it (``aclose``) to cancel.

        Raises:
            as :meth:`run`; a decoupled executor's error also after some responses.
        """
        executor = model.executor
        if not isinstance(executor, Decoupled):
            yield Response(await self.run(model, arrays, outputs, deadline_s), final=True)
            return
        if not model.ready:
            raise Unavailable(NOT_READY.get(model.state, NOT_READY["loading"]))
        responses = executor.responses(dict(arrays), list(outputs), deadline_s)
        async with aclosing(responses) as stream:
            async for response in stream:
                check_size(model, "response", sum(a.nbytes for a in response.outputs.values()))
                yield response
                if response.final:
                    return
        yield Response(final=True)

    @asynccontextmanager
    async def accounted(self, model: ServedModel, request_id: str) -> AsyncIterator[Outcome]:
        """Count one request in ``model``'s statistics and log its outcome; the block
        reports a failure with :meth:`Outcome.failed`. A cancelled request counts as
        ``CANCELED``."""
        started = time.perf_counter_ns()
        model.metrics.request_started()
        outcome = Outcome(request_id, model.name)
        try:
            yield outcome
        except asyncio.CancelledError:
            outcome.reason = "CANCELED"
            raise
        finally:
            duration_ns = time.perf_counter_ns() - started
            model.metrics.request_finished(duration_ns, outcome.reason)
            if outcome.reason is None and log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "request served",
                    extra={
                        "request_id": request_id or uuid.uuid4().hex,
                        "model": model.name,
                        "status": "OK",
                        "duration_ms": round(duration_ns / 1e6, 3),
                    },
                )


def check_size(model: ServedModel, what: str, size: int) -> None:
    """Raise ResourceExhausted when a message of ``size`` bytes is over ``model``'s limit."""
    limit = model.message_limit
    if size > limit:
        raise ResourceExhausted(
            f"{what} is {size} bytes, over the server's limit of {limit} bytes "
            "(MMAAS_MAX_MESSAGE_SIZE; set it, or runtime.max_message_size in model.yaml "
            "and rebuild, to raise it), or send smaller batches"
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
