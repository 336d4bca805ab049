"""Request errors, each carrying the gRPC status code it is answered with.

Everything the server rejects is raised as one of these, and the servicer maps them to
a status in one place (:func:`mmaas.server.servicer.GRPCInferenceService`); a message
always names the field at fault and what was expected (KServe v2 error semantics:
NOT_FOUND for an unknown model/version, INVALID_ARGUMENT for a malformed request).
"""

from __future__ import annotations

import grpc

from mmaas.core.errors import MmaasError


class RequestError(MmaasError):
    """A request the server answers with ``code`` and this message instead of a result."""

    code = grpc.StatusCode.INTERNAL


class InvalidArgument(RequestError):
    """Malformed request: wrong input name, datatype, shape or byte length."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(RequestError):
    """Unknown model name or version."""

    code = grpc.StatusCode.NOT_FOUND


class Unavailable(RequestError):
    """The model is not ready yet, or the server is shutting down."""

    code = grpc.StatusCode.UNAVAILABLE


class ResourceExhausted(RequestError):
    """The queue is full or a message is over the size limit."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class DeadlineExceeded(RequestError):
    """The client's deadline passed before the request reached an engine instance."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED
