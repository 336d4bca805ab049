"""Check an input's ``sample_values`` (model.yaml) against its datatype and complete it.

Forms (:class:`mmaas.spec.model.InputSpec`): a constant, a list of allowed values, a range
``{min, max}``, or a ``.npy``/``.npz`` file in the model folder (an ``.npz`` holds an
array named after the input, or a single array). Every value must fit the input's
datatype by the one narrowing rule (:func:`mmaas.core.datatypes.cast_checked`): no
fraction for an integer input, nothing outside its range, text only for BYTES. A file is
read here, once, and completes to :class:`~mmaas.spec.model.SampleArraySpec` (its data in
the completed spec, so the spec digest and the engine-cache key follow the file's content;
at most :data:`MAX_ELEMENTS` values: sample values are for control inputs, whole inputs go
in ``checks.accuracy.samples``). :func:`sample_values` turns the completed form into the
manifest's :class:`~mmaas.core.sample_values.SampleValues`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from mmaas.core.datatypes import bfloat16, cast_checked, is_floating, to_numpy
from mmaas.core.errors import InputError
from mmaas.core.sample_values import SampleValues
from mmaas.spec.model import SampleArraySpec, SampleRangeSpec, SampleScalar, SampleValuesSpec
from mmaas.spec.yamlio import KeyPath

MAX_ELEMENTS = 65536
FILE_SUFFIXES = (".npy", ".npz")
Report = Callable[[KeyPath, str], None]


def complete_sample_values(
    name: str,
    datatype: str,
    given: SampleValuesSpec | None,
    model_dir: Path,
    path: KeyPath,
    report: Report,
) -> SampleValuesSpec | None:
    """Check ``given`` (the ``sample_values`` of input ``name`` at key ``path``) against
    ``datatype``; return it completed (a file name becomes its array), or None when absent
    or wrong (``report(key_path, message)`` receives every problem)."""
    key, what = (*path, "sample_values"), f"input {name!r}"
    if given is None:
        return None
    if isinstance(given, str):
        given = _read_file(given, name, model_dir, lambda text: report(key, f"{what}: {text}"))
        if given is None:
            return None
    values: Sequence[SampleScalar]
    if isinstance(given, SampleArraySpec):
        values = given.data
        if len(values) != math.prod(given.shape):
            report(
                key,
                f"{what}: data holds {len(values)} values, shape {given.shape} needs "
                f"{math.prod(given.shape)}; name the .npy file instead",
            )
            return None
    elif isinstance(given, SampleRangeSpec):
        values = [given.min, given.max]
        if given.min > given.max:
            report(key, f"{what}: range min {given.min} is above max {given.max}")
            return None
    elif isinstance(given, list):
        values = given
        if not values:
            report(key, f"{what}: the list of allowed values is empty; give at least one")
            return None
    else:
        values = [given]
    problem = value_problem(values, datatype)
    if problem:
        report(key, f"{what}: sample_values: {problem}")
        return None
    return given


def value_problem(values: Sequence[SampleScalar], datatype: str) -> str | None:
    """Why ``values`` cannot be fed to a ``datatype`` input, or None when they all fit."""
    texts = [value for value in values if isinstance(value, str)]
    if datatype == "BYTES":
        return None if len(texts) == len(values) else "a BYTES input takes text values"
    if texts:
        return f"{texts[0]!r} is text, the input is {datatype}: give numbers"
    try:
        cast_checked(np.asarray(values), to_numpy(datatype), "a value")
    except InputError as exc:
        return f"{exc.message.removeprefix('a value: ')} (the input is {datatype})"
    return None


def sample_values(given: SampleValuesSpec | None) -> SampleValues | None:
    """The manifest's form of a completed ``sample_values`` (None stays None)."""
    if given is None or isinstance(given, str):
        return None
    if isinstance(given, SampleArraySpec):
        return SampleValues("array", tuple(given.data), tuple(given.shape))
    if isinstance(given, SampleRangeSpec):
        return SampleValues("range", (given.min, given.max))
    if isinstance(given, list):
        return SampleValues("choices", tuple(given))
    return SampleValues("constant", (given,))


def _read_file(
    name: str, input_name: str, model_dir: Path, problem: Callable[[str], None]
) -> SampleArraySpec | None:
    file = (model_dir / name).resolve()
    where = f"sample_values {name!r}"
    if Path(name).is_absolute() or not file.is_relative_to(model_dir.resolve()):
        problem(f"{where} is outside the model folder; give a path relative to it")
        return None
    if file.suffix not in FILE_SUFFIXES:
        problem(
            f"{where}: text is read as a file name, and this is not an .npy or .npz file; "
            'give a number, a list (["text"] for BYTES) or {min: ..., max: ...}'
        )
        return None
    try:
        array = _load(file, input_name)
    except (OSError, ValueError, KeyError) as exc:
        problem(f"{where}: {exc}")
        return None
    if array.size > MAX_ELEMENTS:
        problem(
            f"{where} holds {array.size} values, more than {MAX_ELEMENTS}; sample values "
            "are for control inputs: put whole inputs in checks.accuracy.samples"
        )
        return None
    return SampleArraySpec(file=name, shape=list(array.shape), data=_plain(array))


def _load(file: Path, input_name: str) -> np.ndarray:
    """The file's array: an ``.npy``, or the ``.npz`` entry named ``input_name`` (or its
    only entry). Raises OSError, ValueError (pickled or malformed), KeyError (no entry)."""
    if not file.is_file():
        raise OSError("does not exist in the model folder")
    if file.suffix == ".npy":
        return _bfloat16_words(np.load(file, allow_pickle=False))
    with np.load(file, allow_pickle=False) as archive:
        names = list(archive.files)
        if input_name in names:
            return _bfloat16_words(archive[input_name])
        if len(names) == 1:
            return _bfloat16_words(archive[names[0]])
    raise KeyError(f"holds {names}, none named {input_name!r}; name the array after the input")


def _bfloat16_words(array: np.ndarray) -> np.ndarray:
    """numpy saves a bfloat16 array as 2-byte void words: read them back as bfloat16."""
    return (
        array.view(bfloat16()) if array.dtype.kind == "V" and array.dtype.itemsize == 2 else array
    )


def _plain(array: np.ndarray) -> list[SampleScalar]:
    """The array's values as JSON-ready Python scalars."""
    if array.dtype.kind in "SU":
        return [v.decode() if isinstance(v, bytes) else str(v) for v in array.reshape(-1)]
    if is_floating(array.dtype):
        return [float(v) for v in array.astype(np.float64).reshape(-1)]
    return array.reshape(-1).tolist()
