"""Run an ONNX Runtime session on numpy arrays of every KServe v2 datatype, BF16 included.

ONNX Runtime's Python binding maps numpy dtypes to tensor types by their numpy type number,
and ``ml_dtypes.bfloat16`` has none it knows: a bfloat16 array fed to ``session.run`` is
refused, a uint16 one is refused as ``tensor(uint16)`` ("expected: tensor(bfloat16)"), and
a bfloat16 output cannot be read back with ``OrtValue.numpy()``. So a session with a BF16
input or output runs through ``OrtValue``s: a BF16 input is wrapped with
``OrtValue.ortvalue_from_numpy_with_onnx_type(words, TensorProto.BFLOAT16)`` (its 2-byte
words), a BF16 output is copied out of the OrtValue's CPU buffer and viewed as bfloat16.
Every other session keeps the plain ``session.run``. Used by the ONNX Runtime back end and
by the accuracy gate's reference session; onnxruntime is imported only when needed.

ONNX Runtime's own console lines (ANSI-coloured ``[W:onnxruntime:...]`` / ``[E:...]``
from its default logger and each session's) would land in the container log beside the
server's: :func:`session_options` turns them off (severity FATAL); its failures still
reach the caller as exceptions, which mmaas reports once, in its own words. Some come
before any setting can apply: importing onnxruntime as a user without a writable home
(the image's user 10001) prints "Failed to persist telemetry device ID". So
:func:`import_onnxruntime` imports it with file descriptor 2 pointed at a temp file and
logs what it printed, ANSI codes removed, at DEBUG on the ``mmaas.onnxruntime`` logger.
"""

from __future__ import annotations

import ctypes
import importlib
import logging
import math
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from mmaas.core.datatypes import bfloat16, is_bfloat16
from mmaas.core.errors import InputError

ONNX_BFLOAT16 = 16  # onnx.TensorProto.BFLOAT16
ORT_FATAL = 4  # ONNX Runtime's log severities: 0 verbose, 1 info, 2 warning, 3 error, 4 fatal
ORT_BFLOAT16 = "tensor(bfloat16)"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
STATUS_PREFIX = re.compile(r"^\[ONNXRuntimeError\] : \d+ : [A-Z_]+ : ")
log = logging.getLogger("mmaas.onnxruntime")


def import_onnxruntime() -> Any:
    """The ``onnxruntime`` module, imported (once) with what it prints on stderr at import
    time logged at DEBUG instead (see the module docstring)."""
    if "onnxruntime" in sys.modules:
        return sys.modules["onnxruntime"]
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            module = importlib.import_module("onnxruntime")
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        printed = captured.read().decode(errors="replace")
    for line in filter(None, (ANSI.sub("", raw).strip() for raw in printed.splitlines())):
        log.debug("%s", line)
    return module


def session_options(ort: Any) -> Any:
    """A new ``ort.SessionOptions`` with ONNX Runtime's console logging off: the default
    logger's (``set_default_logger_severity``, also read by the environment) and the
    session's (``log_severity_level``) both at FATAL. ``ort`` is the onnxruntime module."""
    ort.set_default_logger_severity(ORT_FATAL)
    options = ort.SessionOptions()
    options.log_severity_level = ORT_FATAL
    return options


@contextmanager
def refused_values() -> Iterator[None]:
    """Within the block, ONNX Runtime's INVALID_ARGUMENT (a run refused because of the
    values fed: an input a branch cannot take, an index out of range) is raised as
    :class:`~mmaas.core.errors.InputError`, which the server answers as the client's
    mistake (gRPC INVALID_ARGUMENT, HTTP 400), as Triton's ONNX Runtime back end maps it;
    every other ONNX Runtime status (FAIL, RUNTIME_EXCEPTION...) stays an engine fault."""
    try:
        yield
    except Exception as exc:
        refused = import_onnxruntime().capi.onnxruntime_pybind11_state.InvalidArgument
        if not isinstance(exc, refused):
            raise
        detail = STATUS_PREFIX.sub("", str(exc).strip())
        raise InputError(
            "the engine refused this request's values (ONNX Runtime INVALID_ARGUMENT: "
            f"{detail}); check the inputs' values against what the model accepts"
        ) from None


def has_bfloat16(session: Any) -> bool:
    """True when an input or output of ``session`` (an ``onnxruntime.InferenceSession``)
    is ``tensor(bfloat16)``."""
    return any(arg.type == ORT_BFLOAT16 for arg in (*session.get_inputs(), *session.get_outputs()))


def run_session(
    session: Any, names: Sequence[str], feeds: Mapping[str, np.ndarray], *, bfloat16: bool
) -> list[np.ndarray]:
    """``session.run(names, feeds)``; with ``bfloat16`` (see :func:`has_bfloat16`) through
    OrtValues, so BF16 arrays go in and come out as ``ml_dtypes.bfloat16``.

    Raises:
        Exception: ONNX Runtime's own error for a feed it refuses.
    """
    if not bfloat16:
        return list(session.run(list(names), dict(feeds)))
    ort = import_onnxruntime()
    values = {name: ort_value(ort, array) for name, array in feeds.items()}
    return [_numpy(value) for value in session.run_with_ort_values(list(names), values)]


def ort_value(ort: Any, array: np.ndarray) -> Any:
    """A host ``OrtValue`` of ``array`` (BF16 by its 2-byte words; BYTES as strings)."""
    if is_bfloat16(array.dtype):
        words = np.ascontiguousarray(array).view(np.uint16)
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(words, ONNX_BFLOAT16)
    if array.dtype == object:  # STRING tensors: OrtValue takes them as numpy str arrays
        return ort.OrtValue.ortvalue_from_numpy(array.astype(str))
    return ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array))


def _numpy(value: Any) -> np.ndarray:
    if value.data_type() != ORT_BFLOAT16:
        return np.asarray(value.numpy())
    shape = tuple(value.shape())
    count = math.prod(shape)
    if not count:
        return np.empty(shape, bfloat16())
    words = (ctypes.c_uint16 * count).from_address(value.data_ptr())
    return np.frombuffer(words, np.uint16).copy().view(bfloat16()).reshape(shape)
