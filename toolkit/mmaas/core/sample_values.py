"""An input's sample values: what the build's profile check, the accuracy and latency gates
and the server's warm-up feed an input (model.yaml ``inputs[].sample_values``).

Without them an integer input gets random values 0..7, which runs a model whose integer
input selects a branch (a sample rate, a class id, a length) on the wrong branch. Four
kinds, as :mod:`mmaas.spec.sample_values` completes them from model.yaml:

* ``constant``: every element is ``values[0]``;
* ``choices``: each element is drawn from ``values`` (seeded, so runs repeat);
* ``range``: each element uniform in ``values[0]..values[1]`` (both ends included for
  integer inputs; ``[low, high)`` for float inputs);
* ``array``: the array read from a ``.npy``/``.npz`` file (``values`` flat, ``shape`` its
  shape), used as is where the point's shape equals it, else repeated or cut to the
  point's shape (``numpy.resize``, row-major).

Values are converted with :func:`mmaas.core.datatypes.cast_checked`: one the input's
datatype cannot hold is refused (the spec checks this before any build). Plain dataclass +
JSON (in the manifest and the build request): the runtime image needs no pydantic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from mmaas.core.datatypes import cast_checked, is_floating, to_numpy

# The ModelConfig parameter under which a server publishes its inputs' sample values
# (JSON: {input name: SampleValues.to_json()}), for load tools such as ``mmaas bench``.
CONFIG_PARAMETER = "mmaas.sample_values"
Kind = Literal["constant", "choices", "range", "array"]
KINDS: tuple[Kind, ...] = ("constant", "choices", "range", "array")
# how model.yaml writes them, for messages that propose ``sample_values``
FORMS = "a constant (16000), the allowed values ([8000, 16000]) or a range ({min: 1, max: 64})"


def counts(datatype: str) -> bool:
    """True for the KServe v2 datatypes whose values often select a branch rather than
    carry data: the integer ones and BOOL."""
    return datatype == "BOOL" or datatype.startswith(("INT", "UINT"))


def value_inputs(inputs: Sequence[Any]) -> list[str]:
    """The names of the integer and boolean inputs among ``inputs`` (``TensorInfo``-like:
    ``name``, ``datatype``, ``shape``, ``sample_values``) that have no sample values, the
    scalars first: the inputs whose random values (0..7) may run a model on the wrong
    branch (a sample rate, a length, an index)."""
    found = [t for t in inputs if t.sample_values is None and counts(t.datatype)]
    return [t.name for t in sorted(found, key=lambda t: len(t.shape))]


Scalar = bool | int | float | str


@dataclass(frozen=True)
class SampleValues:
    """One input's sample values (see the module docstring for the kinds).

    Attributes:
        kind: ``constant``, ``choices``, ``range`` or ``array``.
        values: constant: one value; choices: the allowed values; range: (low, high);
            array: the flat data, row-major. BYTES values are text (UTF-8).
        shape: the array's shape (``array`` only).
    """

    kind: Kind
    values: tuple[Scalar, ...]
    shape: tuple[int, ...] | None = None

    def draw(
        self, shape: Sequence[int], datatype: str, rng: np.random.Generator, what: str
    ) -> np.ndarray:
        """An array of ``shape`` and ``datatype`` (KServe v2) made of these values.

        Raises:
            InputError: a value does not fit ``datatype`` (naming ``what``).
        """
        dtype, shape = to_numpy(datatype), tuple(shape)
        if datatype == "BYTES":
            pool = np.empty(len(self.values), dtype=object)
            pool[:] = [str(value).encode() for value in self.values]
        else:
            pool = cast_checked(np.asarray(self.values), dtype, what)
        if self.kind == "constant":
            return np.full(shape, pool[0], dtype=pool.dtype)
        if self.kind == "choices":
            return np.asarray(pool[rng.integers(0, len(pool), shape)], dtype=pool.dtype)
        if self.kind == "array":
            data = pool.reshape(self.shape or (len(pool),))
            return data if data.shape == shape else np.resize(data, shape)
        low, high = self.values[0], self.values[1]
        if is_floating(dtype):
            return cast_checked(rng.uniform(float(low), float(high), shape), dtype, what)
        return cast_checked(rng.integers(int(low), int(high), shape, endpoint=True), dtype, what)

    def to_json(self) -> dict[str, Any]:
        """The JSON form ``{"kind", "values", "shape"}``."""
        return {
            "kind": self.kind,
            "values": list(self.values),
            "shape": None if self.shape is None else list(self.shape),
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any] | None) -> SampleValues | None:
        """Read back :meth:`to_json` (None stays None).

        Raises:
            KeyError, TypeError, ValueError: malformed.
        """
        if raw is None:
            return None
        if raw["kind"] not in KINDS:
            raise ValueError(f"unknown sample values kind {raw['kind']!r}")
        shape = raw.get("shape")
        return cls(raw["kind"], tuple(raw["values"]), None if shape is None else tuple(shape))
