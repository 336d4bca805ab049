"""The one table of tensor datatypes: KServe v2 names <-> numpy dtypes <-> byte sizes.

KServe v2 / Open Inference Protocol "Tensor Data Types": BOOL, UINT8..UINT64, INT8..INT64,
FP16, FP32, FP64, BF16 and BYTES. BF16 has no numpy dtype (served as raw 2-byte words,
uint16); BYTES maps to numpy ``object`` arrays of ``bytes``.
"""

from __future__ import annotations

import numpy as np

from mmaas.core.errors import UsageError

# KServe v2 datatype -> numpy dtype (element size = dtype.itemsize; BYTES is variable).
NUMPY_BY_DATATYPE: dict[str, np.dtype] = {
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
    "BF16": np.dtype(np.uint16),
    "BYTES": np.dtype(np.object_),
}
DATATYPE_BY_NUMPY: dict[np.dtype, str] = {
    dtype: name for name, dtype in NUMPY_BY_DATATYPE.items() if name != "BF16"
}


def to_numpy(datatype: str) -> np.dtype:
    """numpy dtype of a KServe v2 datatype name.

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
    """KServe v2 datatype name of a numpy dtype (``str_``/``bytes_`` map to BYTES).

    Raises:
        UsageError: no KServe v2 datatype holds this dtype.
    """
    dtype = np.dtype(dtype)
    if dtype.kind in ("S", "U", "O"):
        return "BYTES"
    try:
        return DATATYPE_BY_NUMPY[dtype]
    except KeyError as exc:
        raise UsageError(f"numpy dtype {dtype} has no KServe v2 datatype") from exc


def element_size(datatype: str) -> int:
    """Bytes per element of a fixed-size datatype; 0 for BYTES (variable length)."""
    return 0 if datatype == "BYTES" else to_numpy(datatype).itemsize
