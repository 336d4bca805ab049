"""Request errors, each carrying the status it is answered with, by name: KServe v2 /
gRPC status names (``INVALID_ARGUMENT``, ``NOT_FOUND``...), which each front end maps to its
protocol's own (the gRPC front end: ``grpc.StatusCode[status]``), so the request path
(:mod:`mmaas.server.inference`) needs no protocol library.

Everything the server rejects is raised as one of these, and the request path maps every
error to a status in one place (:func:`mmaas.server.inference.failure_of`); a message
always names the field at fault and what was expected (KServe v2 error semantics:
NOT_FOUND for an unknown model/version, INVALID_ARGUMENT for a malformed request).
"""

from __future__ import annotations

from mmaas.core.errors import MmaasError


class RequestError(MmaasError):
    """A request the server answers with ``status`` and this message instead of a result."""

    status = "INTERNAL"


class InvalidArgument(RequestError):
    """Malformed request: wrong input name, datatype, shape or byte length."""

    status = "INVALID_ARGUMENT"


class NotFound(RequestError):
    """Unknown model name or version."""

    status = "NOT_FOUND"


class Unavailable(RequestError):
    """The model is not ready yet, or the server is shutting down."""

    status = "UNAVAILABLE"


class ResourceExhausted(RequestError):
    """The queue is full or a message is over the size limit."""

    status = "RESOURCE_EXHAUSTED"


class DeadlineExceeded(RequestError):
    """The client's deadline passed before the request reached an engine instance."""

    status = "DEADLINE_EXCEEDED"


class AlreadyExists(RequestError):
    """A name is taken (a shared memory region registered twice)."""

    status = "ALREADY_EXISTS"


class Unsupported(RequestError):
    """A KServe v2 / Triton extension this server does not honour (gRPC UNIMPLEMENTED, HTTP
    501), always with a message that says why and what to use instead."""

    status = "UNIMPLEMENTED"
