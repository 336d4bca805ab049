"""The one request path behind every front end: look the model up, check the request
against the served signature, queue it on the scheduler, check the response, and account
for it in the statistics. Protocol-neutral: a front end (``mmaas.server.grpc``; an HTTP/REST
one beside it) decodes its wire format into names, datatypes, shapes and numpy arrays,
calls :class:`InferencePath`, and encodes the result or the :class:`Failure` back.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from mmaas.core.errors import InputError
from mmaas.core.manifest import ModelInfo
from mmaas.server.batcher import Scheduler
from mmaas.server.metrics import ModelMetrics
from mmaas.server.signature import check_inputs, resolve_outputs
from mmaas.server.status import NotFound, RequestError, ResourceExhausted, Unavailable

REJECTED = {"INVALID_ARGUMENT", "NOT_FOUND", "RESOURCE_EXHAUSTED", "UNAVAILABLE"}
NOT_READY = {
    "loading": "the model is not ready yet: its engine is being verified, loaded and "
    "warmed up; retry when health reports SERVING",
    "draining": "the server is shutting down (SIGTERM); send the request to another replica",
}
log = logging.getLogger("mmaas.server")
Header = tuple[str, str, Sequence[int]]  # (name, datatype, shape) of a request input


@dataclass
class ServedModel:
    """What the front ends serve: the signature, the message limit in bytes, statistics,
    the runtime facts the model config reports (``config``: a front end's own type), the
    scheduler (set when loaded) and the ``state``: ``loading``, then ``ready`` (health
    SERVING), then ``draining`` after SIGTERM."""

    info: ModelInfo
    message_limit: int
    metrics: ModelMetrics
    config: Any
    scheduler: Scheduler | None = None
    state: str = "loading"

    @property
    def ready(self) -> bool:
        """True while requests are taken (KServe v2 ServerReady / ModelReady)."""
        return self.state == "ready"


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
    """The request path over one :class:`ServedModel` (see the module docstring)."""

    def __init__(self, model: ServedModel) -> None:
        self.model = model

    def lookup(self, name: str, version: str) -> ModelInfo:
        """The served model's signature when ``name`` and ``version`` ("" = any) name it.

        Raises:
            NotFound: another model or version (KServe v2 semantics).
        """
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

    def admit(
        self, name: str, version: str, size: int, inputs: Sequence[Header], outputs: Sequence[str]
    ) -> list[str]:
        """Check a request before its data is decoded: the model, readiness, its size in
        bytes, its inputs' names, datatypes and shapes; return the outputs to compute.

        Raises:
            NotFound, Unavailable, ResourceExhausted, InvalidArgument.
        """
        info = self.lookup(name, version)
        if self.model.scheduler is None or not self.model.ready:
            raise Unavailable(NOT_READY[self.model.state])
        self.check_size("request", size)
        check_inputs(info, inputs)
        return resolve_outputs(info, outputs)

    async def run(
        self, arrays: Mapping[str, np.ndarray], outputs: Sequence[str], deadline_s: float | None
    ) -> dict[str, np.ndarray]:
        """Queue the decoded inputs on the scheduler (``deadline_s``: seconds the client
        still waits, or None) and return the named outputs.

        Raises:
            Unavailable, ResourceExhausted, DeadlineExceeded, InputError, the engine's error.
        """
        scheduler = self.model.scheduler
        if scheduler is None or not self.model.ready:
            raise Unavailable(NOT_READY[self.model.state])
        results = await scheduler.infer(dict(arrays), list(outputs), deadline_s)
        self.check_size("response", sum(array.nbytes for array in results.values()))
        return results

    def check_size(self, what: str, size: int) -> None:
        """Raise ResourceExhausted when a message of ``size`` bytes is over the limit."""
        limit = self.model.message_limit
        if size > limit:
            raise ResourceExhausted(
                f"{what} is {size} bytes, over the server's limit of {limit} bytes "
                "(MMAAS_MAX_MESSAGE_SIZE; set it, or runtime.max_message_size in model.yaml "
                "and rebuild, to raise it), or send smaller batches"
            )

    @asynccontextmanager
    async def accounted(self, request_id: str) -> AsyncIterator[Outcome]:
        """Count one request in the statistics and log its outcome; the block reports a
        failure with :meth:`Outcome.failed`. A cancelled request counts as ``CANCELED``."""
        started = time.perf_counter_ns()
        self.model.metrics.request_started()
        outcome = Outcome(request_id)
        try:
            yield outcome
        except asyncio.CancelledError:
            outcome.reason = "CANCELED"
            raise
        finally:
            duration_ns = time.perf_counter_ns() - started
            self.model.metrics.request_finished(duration_ns, outcome.reason)
            if outcome.reason is None and log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "request served",
                    extra={
                        "request_id": request_id or uuid.uuid4().hex,
                        "status": "OK",
                        "duration_ms": round(duration_ns / 1e6, 3),
                    },
                )


class Outcome:
    """How one accounted request ended: ``reason`` stays None for a success."""

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
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
            extra={"request_id": self.request_id or "-", "status": failure.status},
        )
        return failure
