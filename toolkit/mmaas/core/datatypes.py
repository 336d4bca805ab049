"""The one table of tensor datatypes: KServe v2 names <-> numpy dtypes <-> byte sizes, and
the one checked cast between them.

KServe v2 / Open Inference Protocol "Tensor Data Types": BOOL, UINT8..UINT64, INT8..INT64,
FP16, FP32, FP64, BF16 and BYTES. BF16 is ``ml_dtypes.bfloat16`` (the numpy dtype ONNX and
JAX use; 2 bytes, little-endian on the wire), imported on first use: its import takes about
0.5 s, which a command or a server with no BF16 tensor never pays (:func:`bfloat16`,
:func:`is_bfloat16`; ``BFLOAT16`` is resolved when first read). BYTES maps to numpy
``object`` arrays of ``bytes``. :func:`cast_checked` is the rule for every narrowing
conversion (a request's INT64 into an engine's INT32 binding, JSON numbers into a tensor,
sample values into an input): values the target cannot hold are refused, never wrapped or
saturated.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

import numpy as np

from mmaas.core.errors import InputError, UsageError

BF16_NAME = "bfloat16"  # numpy's name of ml_dtypes.bfloat16
# KServe v2 datatype -> numpy dtype; BF16 None here (imported on first use: bfloat16())
_DTYPES: dict[str, np.dtype | None] = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
    "BF16": None,
    "BYTES": np.dtype(np.object_),
}
FLOATING = ("FP16", "FP32", "FP64", "BF16")


@cache
def bfloat16() -> np.dtype:
    """``ml_dtypes.bfloat16`` as a numpy dtype (imported on the first call)."""
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


def is_bfloat16(dtype: Any) -> bool:
    """True for ``ml_dtypes.bfloat16`` (without importing ml_dtypes: no array can have that
    dtype before it is imported)."""
    return np.dtype(dtype).name == BF16_NAME


class _Datatypes(Mapping[str, np.dtype]):
    """KServe v2 datatype -> numpy dtype, in the table's order; BF16 resolved on access."""

    def __getitem__(self, name: str) -> np.dtype:
        dtype = _DTYPES[name]
        return bfloat16() if dtype is None else dtype

    def __iter__(self) -> Iterator[str]:
        return iter(_DTYPES)

    def __len__(self) -> int:
        return len(_DTYPES)


# KServe v2 datatype -> numpy dtype (element size = dtype.itemsize; BYTES is variable).
NUMPY_BY_DATATYPE: Mapping[str, np.dtype] = _Datatypes()
DATATYPE_BY_NUMPY: dict[np.dtype, str] = {d: n for n, d in _DTYPES.items() if d is not None}


def __getattr__(name: str) -> Any:
    """``BFLOAT16``: :func:`bfloat16`'s dtype, resolved (and ml_dtypes imported) when read."""
    if name == "BFLOAT16":
        return bfloat16()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def to_numpy(datatype: str) -> np.dtype:
    """numpy dtype of a KServe v2 datatype name (BF16: ``ml_dtypes.bfloat16``).

    Raises:
        UsageError: the name is not a KServe v2 datatype.
    """
    try:
        return NUMPY_BY_DATATYPE[datatype]
    except KeyError as exc:
        raise UsageError(
            f"unknown datatype {datatype!r}; KServe v2 datatypes are {', '.join(NUMPY_BY_DATATYPE)}"
        ) from exc


def from_numpy(dtype: np.dtype) -> str:
    """KServe v2 datatype name of a numpy dtype (``str_``/``bytes_`` map to BYTES,
    ``ml_dtypes.bfloat16`` to BF16).

    Raises:
        UsageError: no KServe v2 datatype holds this dtype.
    """
    dtype = np.dtype(dtype)
    name = DATATYPE_BY_NUMPY.get(dtype)  # the common case, before the slower checks
    if name is not None:
        return name
    if dtype.kind in ("S", "U", "O"):
        return "BYTES"
    if is_bfloat16(dtype):
        return "BF16"
    try:
        return DATATYPE_BY_NUMPY[dtype]
    except KeyError as exc:
        raise UsageError(f"numpy dtype {dtype} has no KServe v2 datatype") from exc


def element_size(datatype: str) -> int:
    """Bytes per element of a fixed-size datatype; 0 for BYTES (variable length)."""
    return 0 if datatype == "BYTES" else to_numpy(datatype).itemsize


def is_floating(dtype: np.dtype) -> bool:
    """True for FP16, FP32, FP64 and BF16 (``ml_dtypes.bfloat16`` is numpy kind ``V``)."""
    return np.dtype(dtype).kind == "f" or is_bfloat16(dtype)


def cast_checked(array: np.ndarray, dtype: np.dtype, what: str) -> np.ndarray:
    """``array`` as ``dtype``, refusing every value the cast would change other than a
    float's rounding: an integer outside the target's range (2**40 + 5 into INT32 would
    wrap to 5), a negative into an unsigned type, a fraction, NaN or infinity into an
    integer type, a finite value that overflows a float type to infinity, a number into
    BOOL other than 0 and 1. The same dtype, or a widening one, returns at no cost.

    ``what`` names the tensor in the message (``input 'x'``).

    Raises:
        InputError: naming ``what``, the first offending value and the target's range
            (the server answers INVALID_ARGUMENT with it).
    """
    source, target = np.dtype(array.dtype), np.dtype(dtype)
    if source == target or np.can_cast(source, target, "safe"):
        return array.astype(target, copy=False)
    if source.kind == "O" or target.kind == "O":
        raise InputError(f"{what}: cannot convert {source} values to {_name(target)}")
    values = array.astype(np.float32) if is_bfloat16(source) else array
    with np.errstate(over="ignore", invalid="ignore"):
        cast = values.astype(target)
    bad = _refused(values, cast, target)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InputError(
            f"{what}: value {values[index].item()!r} at index {list(index)} does not fit "
            f"{_name(target)} ({_range(target)}); refusing to narrow it"
        )
    return cast


def _refused(values: np.ndarray, cast: np.ndarray, target: np.dtype) -> np.ndarray:
    """Mask of the elements of ``values`` that ``target`` cannot hold (``cast``: them cast)."""
    kind = values.dtype.kind
    if target.kind == "b":
        return np.asarray((values != 0) & (values != 1))
    if target.kind in "iu":
        limits = np.iinfo(target)
        if kind == "b":
            return np.zeros(values.shape, bool)
        if kind == "f":
            with np.errstate(invalid="ignore"):
                whole = np.isfinite(values) & (values == np.round(values))
                upper = 2.0 ** (target.itemsize * 8 - (target.kind == "i"))  # exact
                inside = (values >= limits.min) & (values < upper)
            return np.asarray(~(whole & inside))
        return np.asarray((values < limits.min) | (values > limits.max))
    # a float target: only a finite value that becomes infinite is refused (rounding is
    # what a float datatype means)
    wide = values.astype(np.float64) if kind != "b" else values
    return np.asarray(np.isfinite(wide) & ~np.isfinite(cast.astype(np.float64)))


def _name(dtype: np.dtype) -> str:
    return "BF16" if is_bfloat16(dtype) else DATATYPE_BY_NUMPY.get(np.dtype(dtype), str(dtype))


def _range(dtype: np.dtype) -> str:
    if dtype.kind == "b":
        return "0 or 1"
    if dtype.kind in "iu":
        limits = np.iinfo(dtype)
        return f"{limits.min}..{limits.max}"
    import ml_dtypes  # its finfo covers bfloat16 as well as numpy's floats

    largest = float(ml_dtypes.finfo(dtype).max)
    return f"|value| <= {largest:.6g}"
