"""Helpers of the HTTP front end's tests: a tritonclient.http input from an array (binary
or JSON data) and curl, the client nobody here wrote, run as a subprocess."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import tritonclient.http as triton

CURL = shutil.which("curl")


def http_input(
    name: str, array: np.ndarray, datatype: str, binary: bool = True
) -> triton.InferInput:
    """A tritonclient.http input holding ``array`` as ``datatype``, sent as binary data
    or, with ``binary=False``, as JSON."""
    tensor = triton.InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(array, binary_data=binary)
    return tensor


def curl(*args: str) -> subprocess.CompletedProcess[str]:
    """curl ``-sS`` with ``args``; its output as text (60 s at most)."""
    assert CURL, "curl is not installed (scripts/setup.sh installs it)"
    return subprocess.run([CURL, "-sS", *args], capture_output=True, text=True, timeout=60)
