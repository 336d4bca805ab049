"""Where ONNX Runtime put a session's nodes, and whether the GPU provider really runs (C34).

ONNX Runtime reports node placement only in its verbose log (``VerifyEachNodeIsAssignedToAnEp``:
``All nodes placed on [P]. Number of nodes: N``, or ``Node(s) placed on [P]. Number of
nodes: N`` followed by one ``Op (name)`` line per node), written by its C++ logger to file
descriptor 2. :func:`capture_fd2` redirects that descriptor to a temporary file while a
session is created, and puts every other line back on stderr. A CUDA provider library
that cannot load (a missing libcudnn or libcublas) raises nothing, even with
``enable_fallback=0``: the session comes up on the CPU, and the only signs are the lines
``Failed to load library ...`` and ``Failed to create CUDAExecutionProvider``, kept in
:attr:`Placement.errors` as the reason the preflight gives.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

_ORT_LINE = re.compile(
    r"^(?:\x1b\[[0-9;]*m)?\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \[[VIWEF]:onnxruntime"
)
_ALL = re.compile(r"All nodes placed on \[(\w+)\]\. Number of nodes: (\d+)")
_SOME = re.compile(r"Node\(s\) placed on \[(\w+)\]\. Number of nodes: (\d+)")
_NODE = re.compile(r"VerifyEachNodeIsAssignedToAnEp\]\s{3,}(\S+ \(.*\))\s*$")
_MEMCPY = re.compile(r"(\d+) Memcpy nodes are added to the graph")
_ERRORS = (
    "Failed to load library",
    "Failed to create CUDAExecutionProvider",
    "Failed to create TensorrtExecutionProvider",
    "EP Error",
)
_lock = threading.Lock()


@dataclass
class Placement:
    """Node counts per provider, the nodes on the CPU provider (``Op (name)``), how many
    Memcpy nodes ONNX Runtime added (each one blocks CUDA graph capture), and the provider
    start-up errors found in the log."""

    nodes: dict[str, int] = field(default_factory=dict)
    cpu_nodes: list[str] = field(default_factory=list)
    memcpy: int = 0
    errors: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """``CUDAExecutionProvider 178, CPUExecutionProvider 3 (Squeeze (a), ...)``."""
        parts = []
        for provider, count in self.nodes.items():
            cpu = provider == "CPUExecutionProvider" and self.cpu_nodes
            parts.append(f"{provider} {count}" + (f" ({', '.join(self.cpu_nodes)})" if cpu else ""))
        return ", ".join(parts) or "no placement logged"


def parse_placement(log: str) -> Placement:
    """Read a session's verbose log (module doc) into a :class:`Placement`."""
    placement, current = Placement(), None
    for line in log.splitlines():
        if found := _ALL.search(line) or _SOME.search(line):
            current = found.group(1)
            placement.nodes[current] = int(found.group(2))
        elif (node := _NODE.search(line)) and current == "CPUExecutionProvider":
            placement.cpu_nodes.append(node.group(1))
        elif memcpy := _MEMCPY.search(line):
            placement.memcpy += int(memcpy.group(1))
        if any(marker in line for marker in _ERRORS):
            placement.errors.append(_clean(line))
    return placement


class Captured:
    """What :func:`capture_fd2` caught: ONNX Runtime's lines (``text``)."""

    text = ""


@contextmanager
def capture_fd2() -> Iterator[Captured]:
    """Send file descriptor 2 to a temporary file for the block; afterwards ``text`` holds
    ONNX Runtime's log lines and every other line is written back to stderr. One capture
    at a time (a lock): start-up creates sessions one after another."""
    captured = Captured()
    with _lock, tempfile.TemporaryFile() as sink:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            yield captured
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            text = sink.read().decode(errors="replace")
            ours = [line for line in text.splitlines(keepends=True) if _ORT_LINE.match(line)]
            captured.text = "".join(ours)
            others = "".join(
                line for line in text.splitlines(keepends=True) if not _ORT_LINE.match(line)
            )
            if others:
                sys.stderr.write(others)
                sys.stderr.flush()


def _clean(line: str) -> str:
    line = re.sub(r"\x1b\[[0-9;]*m", "", line).strip()
    return line.split("] ", 1)[1] if _ORT_LINE.match(line) and "] " in line else line
