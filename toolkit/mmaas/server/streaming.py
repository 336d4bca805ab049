"""The decoupled (streaming) interface: how a served model answers one request with many
responses (Triton's *decoupled* model transaction policy), and how the request path
turns every model, decoupled or not, into one stream of responses (docs/protocol.md,
"Streaming", states the same contract for clients).

A model's executor computes its requests (``infer(inputs, outputs, timeout_s) -> outputs``).
An executor that can answer with many responses also implements :class:`Decoupled`:
``responses(...)`` is an async iterator of :class:`Response`, e.g. one per generated token
for a generation model. Its ``infer`` still answers the whole request at once (a client
of ModelInfer, ``/infer`` or ``/generate`` gets the joined answer).

The rules:

* Front ends never call an executor: they iterate
  :meth:`mmaas.server.dataplane.DataPlane.stream` (over
  :func:`mmaas.server.inference.responses`), which yields exactly one final response for
  an ordinary model and every response of a decoupled one, the last always flagged
  ``final`` (an empty final response is added when the executor's iterator ends without
  one).
* gRPC ``ModelStreamInfer`` sends each as a ``ModelStreamInferResponse``
  (``triton_final_response`` = ``final``; an empty final one only when the request set
  ``triton_enable_empty_final_response``); HTTP ``/generate_stream`` sends each as one
  server-sent event with ``"final"``.
* An exception raised by the iterator is that request's error: one error response, then
  the request ends; other requests on the same gRPC stream go on.
* When the client goes away the front end closes the iterator (``aclose``): the
  executor's generator gets ``GeneratorExit`` at its pending ``await``/``yield`` and must
  stop there, within one step; the request counts as ``CANCELED`` in the statistics.
* Outputs of a decoupled model cannot go to shared memory (each response would overwrite
  the last): such a request is refused before the model runs.

See also Triton's ``docs/user_guide/decoupled_models.md``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class Response:
    """One response to a request.

    Attributes:
        outputs: ``{output name: array}`` (KServe v2 datatypes as numpy dtypes); may be
            empty (an empty final response: the request is complete, nothing more to say).
        final: the last response of its request (Triton's
            ``TRITONSERVER_RESPONSE_COMPLETE_FINAL``, sent as ``triton_final_response``).
    """

    outputs: Mapping[str, np.ndarray] = field(default_factory=dict)
    final: bool = False


@runtime_checkable
class Decoupled(Protocol):
    """An executor that answers one request with zero or more responses.

    ``responses`` gets the same checked ``inputs``, the requested ``outputs`` and the
    client's remaining ``timeout_s`` (None = no deadline) as ``infer``. It yields
    :class:`Response` objects; it should flag the last one ``final`` when it knows it is the
    last (a generation model: the EOS token or ``max_tokens``), else ending the iterator
    ends the request. Raising ends the request with that error (RequestError subclasses
    keep their status; anything else is INTERNAL), also after responses were sent.
    """

    def responses(
        self, inputs: Mapping[str, np.ndarray], outputs: Sequence[str], timeout_s: float | None
    ) -> AsyncIterator[Response]:
        """The responses to one request, in order (see the class docstring)."""
        ...


def is_decoupled(executor: object) -> bool:
    """True when ``executor`` streams (implements :class:`Decoupled`)."""
    return isinstance(executor, Decoupled)
