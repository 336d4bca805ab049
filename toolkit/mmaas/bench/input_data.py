"""``mmaas bench --input-data FILE``: request data in perf_analyzer's JSON format (its
``--input-data``, ``docs/input_data.md``), so one file drives both tools::

    {"data": [
        {"input": [0.1, 0.2, ...],                      # values, flat or nested
         "state": {"content": [...], "shape": [2, 1, 128]},  # values with their shape
         "sr": [16000]},
        {"input": {"b64": "<base64 of the raw bytes>", "shape": [1, 512]}, ...},
        ...]}

Each entry of ``data`` is one request's inputs; the load cycles through them in order. A
tensor without ``"shape"`` takes the input's shape (``--shape`` or the static shape the
server advertises); nested values give their own. ``b64`` holds the tensor's raw
little-endian bytes (BYTES: each element's 4-byte length, then its bytes). Values are
checked against the datatype (one that does not fit is refused, never narrowed).
perf_analyzer's sequence form (a list of streams, each a list of steps) is not taken.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mmaas.core.datatypes import cast_checked, to_numpy
from mmaas.core.errors import InputError, UsageError
from mmaas.core.manifest import TensorInfo

Step = dict[str, np.ndarray]


def read_input_data(path: Path, tensors: Sequence[TensorInfo]) -> list[Step]:
    """The requests' inputs in ``path``, one ``{name: array}`` per entry of ``data``, each
    input as ``tensors`` declares it (name, datatype; ``shape``: the full shape to use when
    the file gives none, ``-1`` where it must).

    Raises:
        UsageError: unreadable JSON, no ``data`` list of objects, an unknown or missing
            input, values that do not fit the datatype or the shape (naming the file, the
            entry and the input).
    """
    try:
        document = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"--input-data {path}: not readable JSON ({exc})") from None
    steps = document.get("data") if isinstance(document, dict) else None
    if not isinstance(steps, list) or not steps or not all(isinstance(s, dict) for s in steps):
        raise UsageError(
            f'--input-data {path}: expected {{"data": [{{"<input>": [values...], ...}}, ...]}} '
            "(perf_analyzer's format; a list of streams is not taken)"
        )
    declared = {tensor.name: tensor for tensor in tensors}
    where = f"--input-data {path}: data"
    return [_step(step, declared, f"{where}[{i}]") for i, step in enumerate(steps)]


def _step(step: Mapping[str, Any], declared: Mapping[str, TensorInfo], where: str) -> Step:
    unknown = sorted(set(step) - set(declared))
    missing = [name for name in declared if name not in step]
    if unknown or missing:
        raise UsageError(
            f"{where}: the model takes {', '.join(declared)}; unknown {unknown}, missing {missing}"
        )
    return {name: _array(step[name], declared[name], f"{where}: input {name!r}") for name in step}


def _array(entry: Any, tensor: TensorInfo, where: str) -> np.ndarray:
    shape = tensor.shape
    if isinstance(entry, dict):
        if "shape" in entry:
            shape = tuple(entry["shape"])
        if "b64" in entry:
            return _raw(entry["b64"], tensor.datatype, shape, where)
        entry = entry.get("content")
    if not isinstance(entry, list):
        raise UsageError(f"{where}: give a list of values, or content/b64 with a shape")
    try:
        values = _values(entry, tensor.datatype, where)
    except InputError as exc:
        raise UsageError(exc.message) from None
    except (ValueError, TypeError) as exc:  # ragged nesting, objects for numbers
        raise UsageError(f"{where}: unreadable values ({exc})") from None
    if values.ndim > 1 and shape == tensor.shape and any(dim < 0 for dim in shape):
        shape = values.shape  # nested values carry their own shape
    if any(dim < 0 for dim in shape):
        raise UsageError(
            f'{where}: shape {list(shape)} has dynamic dims: add "shape" to the entry or '
            "give --shape"
        )
    if values.size != int(np.prod(shape)):
        raise UsageError(f"{where}: {values.size} values do not fill shape {list(shape)}")
    return values.reshape(shape)


def _values(entry: list[Any], datatype: str, where: str) -> np.ndarray:
    if datatype == "BYTES":
        items = np.asarray(entry, dtype=object)
        flat = np.empty(items.size, dtype=object)
        flat[:] = [str(item).encode() for item in items.reshape(-1)]
        return flat.reshape(items.shape)
    return cast_checked(np.asarray(entry), to_numpy(datatype), where)


def _raw(text: Any, datatype: str, shape: tuple[int, ...], where: str) -> np.ndarray:
    try:
        data = base64.b64decode(str(text), validate=True)
    except binascii.Error as exc:
        raise UsageError(f"{where}: b64 is not base64 ({exc})") from None
    if datatype == "BYTES":
        items, offset = [], 0
        while offset < len(data):
            size = int.from_bytes(data[offset : offset + 4], "little")
            items.append(data[offset + 4 : offset + 4 + size])
            offset += 4 + size
        flat = np.empty(len(items), dtype=object)
        flat[:] = items
    else:  # raw tensor data is little-endian
        flat = np.frombuffer(data, dtype=to_numpy(datatype).newbyteorder("<"))
    if any(dim < 0 for dim in shape) or flat.size != int(np.prod(shape)):
        raise UsageError(f"{where}: {flat.size} elements in b64 do not fill shape {list(shape)}")
    return flat.reshape(shape)
