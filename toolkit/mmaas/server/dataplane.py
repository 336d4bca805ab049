"""The one request path behind every front end (in the spirit of Seldon MLServer's
``DataPlane.infer``): resolve the model and version, read the request, check it against
the model (readiness, its request-level parameters (:mod:`.parameters`), size, the
signature's names, datatypes and shapes, the outputs'
wishes), decode its tensors with the one codec, schedule it on the model's executor,
encode the response (its size, shared memory outputs), account for it in the model's
statistics, log it, and map any failure to one status and message.

A front end only translates its wire format: it hands :meth:`DataPlane.infer` (one
response) or :meth:`DataPlane.stream` (every response of a decoupled model) the model's
name and version and an :class:`Exchange`, whose ``read`` turns the wire request into an
:class:`~mmaas.server.protocol.types.InferRequest` once the model is known (HTTP reads its
body within that model's message limit) and whose ``write`` turns each
:class:`~mmaas.server.protocol.types.InferResponse` into the wire's answer. Every failure,
an unknown model included, comes back as :class:`Failed`, whose status the front end maps
with its one error table (gRPC status codes, HTTP statuses)::

    try:
        answer = await plane.infer(name, version, exchange, deadline_s)
    except Failed as failed:
        ...  # answer failed.failure.status / failed.failure.message
"""

from __future__ import annotations

import traceback
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np

from mmaas.server.inference import (
    Failure,
    Outcome,
    accounted,
    check_ready,
    check_size,
    failure_of,
    responses,
    run,
)
from mmaas.server.parameters import deadline_of, with_parameters
from mmaas.server.protocol.memory import MemoryLease, SharedMemory
from mmaas.server.protocol.shm import TensorRef
from mmaas.server.protocol.tensors import check_outputs, decode_inputs, encode_outputs
from mmaas.server.protocol.types import InferRequest, InferResponse
from mmaas.server.repository import Repository, ServedModel
from mmaas.server.signature import as_advertised, as_declared, check_inputs, resolve_outputs
from mmaas.server.status import InvalidArgument, RequestError
from mmaas.server.streaming import is_decoupled

Wire = TypeVar("Wire", covariant=True)


class Exchange(Protocol[Wire]):
    """One request's wire side, as a front end gives it to the data plane."""

    async def read(self, model: ServedModel) -> InferRequest:
        """The request, translated from the wire, for ``model`` (its message limit and
        signature, when the wire needs them to read it).

        Raises:
            RequestError: the wire message is malformed (answered with its status).
        """
        ...

    def write(self, model: ServedModel, request: InferRequest, response: InferResponse) -> Wire:
        """One response of ``request``, translated to the wire.

        Raises:
            RequestError: the response cannot travel on this wire (answered as a failure).
        """
        ...


class Failed(Exception):
    """A request answered with a failure: ``failure`` (status, message, statistics
    reason), the error that caused it and the model it named, when it exists."""

    def __init__(self, failure: Failure, cause: Exception, model: ServedModel | None) -> None:
        super().__init__(failure.message)
        self.failure = failure
        self.cause = cause
        self.model = model


@dataclass(frozen=True)
class Admitted:
    """A request checked and decoded: the outputs to compute, in order, and the shared
    memory places of those that go there."""

    request: InferRequest
    arrays: dict[str, np.ndarray]
    outputs: list[str]
    refs: dict[str, TensorRef]


class DataPlane:
    """The request path over the server's repository and its shared memory (system and
    CUDA regions; each request holds a lease on the regions it uses until it is answered,
    so unregistering them never fails it: :mod:`mmaas.server.protocol.regions`)."""

    def __init__(self, repository: Repository, shm: SharedMemory) -> None:
        self.repository = repository
        self.shm = shm

    def lookup(self, name: str, version: str) -> ServedModel:
        """The model ``name`` at ``version`` ("" = its latest).

        Raises:
            NotFound: another model or version (KServe v2 semantics).
        """
        return self.repository.get(name, version)

    async def infer(
        self,
        name: str,
        version: str,
        exchange: Exchange[Wire],
        deadline_s: float | None = None,
        request_id: str = "",
    ) -> Wire:
        """Answer one request with one response (a decoupled model's joined one);
        ``deadline_s``: seconds the client still waits, or None (the request's ``timeout``
        parameter tightens it: :func:`~mmaas.server.parameters.deadline_of`); ``request_id``: the
        request's id when the wire names it before the request is read (gRPC), so that a
        request that cannot be read is logged with it.

        Raises:
            Failed: for every failure, an unknown model included.
        """
        model = self._find(name, version)
        async with accounted(model, request_id) as outcome:
            with self.shm.lease() as regions:
                try:
                    return await self._answer(model, exchange, outcome, regions, deadline_s)
                except Exception as exc:
                    raise _failed(outcome, exc, model) from exc

    async def stream(
        self,
        name: str,
        version: str,
        exchange: Exchange[Wire],
        deadline_s: float | None = None,
        request_id: str = "",
    ) -> AsyncGenerator[Wire, None]:
        """Every response to one request, written: one for an ordinary model, each of a
        decoupled one, the last always final (:mod:`mmaas.server.streaming`). The request is
        accounted for before its final response is handed out; closing the iterator
        (``aclose``) before then cancels the request. Arguments as :meth:`infer`.

        Raises:
            Failed: for every failure, also after some responses.
        """
        model = self._find(name, version)
        last: Wire | None = None
        async with accounted(model, request_id) as outcome:
            with self.shm.lease() as regions:
                try:
                    answers = self._answers(model, exchange, outcome, regions, deadline_s)
                    async with aclosing(answers) as stream:
                        async for written, final in stream:
                            if final:
                                last = written
                                break
                            yield written
                except Exception as exc:
                    raise _failed(outcome, exc, model) from exc
        assert last is not None  # responses() always ends with a final response
        yield last

    async def _answer(
        self,
        model: ServedModel,
        exchange: Exchange[Wire],
        outcome: Outcome,
        regions: MemoryLease,
        deadline_s: float | None,
    ) -> Wire:
        admitted = await self._admit(model, exchange, outcome, regions)
        deadline_s = deadline_of(admitted.request, deadline_s)
        results = await run(model, admitted.arrays, admitted.outputs, deadline_s)
        response = self._response(model, admitted, regions, results)
        return exchange.write(model, admitted.request, response)

    async def _answers(
        self,
        model: ServedModel,
        exchange: Exchange[Wire],
        outcome: Outcome,
        regions: MemoryLease,
        deadline_s: float | None,
    ) -> AsyncGenerator[tuple[Wire, bool], None]:
        admitted = await self._admit(model, exchange, outcome, regions)
        if admitted.refs and is_decoupled(model.executor):
            raise InvalidArgument(
                "outputs of a decoupled model cannot go to shared memory (each "
                "response would overwrite the last); drop shared_memory_region "
                "from the outputs"
            )
        deadline_s = deadline_of(admitted.request, deadline_s)
        answers = responses(model, admitted.arrays, admitted.outputs, deadline_s)
        async with aclosing(answers) as stream:
            async for answer in stream:
                response = self._response(model, admitted, regions, answer.outputs, answer.final)
                yield exchange.write(model, admitted.request, response), answer.final
                if answer.final:
                    return

    def _find(self, name: str, version: str) -> ServedModel:
        try:
            return self.lookup(name, version)
        except RequestError as exc:  # an unknown model has no statistics to count it in
            raise Failed(failure_of(exc), exc, None) from exc

    async def _admit(
        self, model: ServedModel, exchange: Exchange[Wire], outcome: Outcome, regions: MemoryLease
    ) -> Admitted:
        request = as_declared(model.info, await exchange.read(model))
        outcome.request_id = request.id
        check_ready(model)
        request = with_parameters(model.info, request)
        check_size(model, "request", request.size)
        check_inputs(model.info, request.headers)
        outputs = resolve_outputs(model.info, [output.name for output in request.outputs])
        refs = check_outputs(request, regions)
        return Admitted(request, decode_inputs(request, regions), outputs, refs)

    def _response(
        self,
        model: ServedModel,
        admitted: Admitted,
        regions: MemoryLease,
        results: Mapping[str, np.ndarray],
        final: bool = True,
    ) -> InferResponse:
        outputs = encode_outputs(as_advertised(model.info, results), admitted.refs, regions)
        return InferResponse(model.name, model.version, admitted.request.id, outputs, final)


def _failed(outcome: Outcome, exc: Exception, model: ServedModel) -> Failed:
    """The :class:`Failed` of ``exc`` (logged and counted by ``outcome``), with the locals
    of the finished frames ``exc`` passed through cleared (``traceback.clear_frames``): the
    frame that catches an error and the error's traceback reference each other, so without
    this a failed request's decoded inputs (device arrays that pin CUDA regions among them)
    would live until the next garbage collection instead of ending with the request."""
    failure = Failed(outcome.failed(exc), exc, model)
    traceback.clear_frames(exc.__traceback__)
    return failure
