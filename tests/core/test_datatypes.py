"""The one datatype table and the one narrowing rule (mmaas.core.datatypes.cast_checked):
BF16 is ml_dtypes.bfloat16, and a value a cast would change is refused, never wrapped."""

from __future__ import annotations

import re
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from mmaas.core.datatypes import BFLOAT16, cast_checked, from_numpy, to_numpy
from mmaas.core.errors import InputError


def test_bf16_is_ml_dtypes_bfloat16_both_ways() -> None:
    assert to_numpy("BF16") == np.dtype(ml_dtypes.bfloat16)
    assert from_numpy(np.dtype(ml_dtypes.bfloat16)) == "BF16"
    assert from_numpy(np.dtype(np.uint16)) == "UINT16"  # no longer mistaken for BF16


@pytest.mark.parametrize(
    ("values", "source", "target", "bad"),
    [
        ([7, 2**40 + 5], np.int64, np.int32, "1099511627781"),  # would wrap to 5
        ([3, -1], np.int64, np.uint32, "-1"),
        ([2**64 - 1], np.uint64, np.int64, "18446744073709551615"),
        ([1.0, 2.5], np.float64, np.int64, "2.5"),
        ([np.nan], np.float32, np.int32, "nan"),
        ([2.0**63], np.float64, np.int64, "9.223372036854776e+18"),
        ([1e300], np.float64, np.float32, "1e+300"),
        ([70000.0], np.float32, np.float16, "70000.0"),
        ([3.4e38], np.float64, BFLOAT16, "3.4e+38"),
        ([2], np.int64, np.bool_, "2"),
    ],
)
def test_narrowing_refuses_values_that_do_not_fit_naming_the_tensor(
    values: list, source: type, target: type, bad: str
) -> None:
    expected = rf"^input 'ids': value {re.escape(bad)} at index \[\d\] does not fit"
    with pytest.raises(InputError, match=expected):
        cast_checked(np.array(values, dtype=source), np.dtype(target), "input 'ids'")


def test_values_that_fit_are_cast_and_widening_is_free() -> None:
    ids = np.array([2**31 - 1, -(2**31)], np.int64)
    assert cast_checked(ids, np.dtype(np.int32), "x").tolist() == ids.tolist()
    wide = np.arange(3, dtype=np.int32)
    assert cast_checked(wide, np.dtype(np.int32), "x") is wide
    halves = np.array([1.5, -2.0], BFLOAT16)
    assert cast_checked(halves, np.dtype(np.float32), "x").tolist() == [1.5, -2.0]
    assert cast_checked(np.array([0.1]), BFLOAT16, "x").dtype == BFLOAT16  # rounding is fine
    assert cast_checked(np.array([np.inf]), np.dtype(np.float32), "x")[0] == np.inf


def test_bf16_is_imported_only_when_used() -> None:
    """ml_dtypes' import takes about 0.5 s: a process with no BF16 tensor never pays it."""
    probe = (
        "import sys, numpy as np\n"
        "from mmaas.core import datatypes as d\n"
        "assert d.from_numpy(np.float32) == 'FP32' and d.is_floating(np.float16)\n"
        "d.cast_checked(np.arange(3), np.int32, 'x'); list(d.NUMPY_BY_DATATYPE)\n"
        "import mmaas.server.app, mmaas.core.ort_io\n"
        "assert 'ml_dtypes' not in sys.modules, 'imported before any BF16 use'\n"
        "assert d.NUMPY_BY_DATATYPE['BF16'] == d.BFLOAT16 and d.from_numpy(d.BFLOAT16) == 'BF16'\n"
        "assert 'ml_dtypes' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
