"""Atomic writes of exported graphs and binary side files (temp file or folder beside the
target, mode 0644, then rename)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Bytes of weights past which a .onnx cannot hold them (protobuf's 2 GiB, with headroom).
PROTOBUF_LIMIT = (2 << 30) - (64 << 20)
# torch.onnx's per-node Python stack trace: it holds the exporter's file paths, so the same
# export from another checkout would give other bytes (and another engine-cache key).
STACK_TRACE = "pkg.torch.onnx.stack_trace"


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to a temp file beside ``path`` (mode 0644) and rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", delete=False) as f:
        f.write(data)
    os.chmod(f.name, 0o644)  # NamedTemporaryFile makes 0600
    os.replace(f.name, path)


def save_program(program: Any, output: Path, weight_bytes: int) -> list[Path]:
    """Save a ``torch.onnx.ONNXProgram`` atomically (:func:`_save_atomically`). Each node's
    stack trace (:data:`STACK_TRACE`) is dropped, so the bytes do not depend on where the
    code lies."""
    for node in program.model.graph.all_nodes():
        node.metadata_props.pop(STACK_TRACE, None)
    external = weight_bytes >= PROTOBUF_LIMIT
    return _save_atomically(
        output, external, lambda path: program.save(str(path), external_data=external)
    )


def save_model(model: Any, output: Path) -> list[Path]:
    """Save an ``onnx.ModelProto`` atomically (:func:`_save_atomically`), its initializers
    in ``<name>.data`` when they pass protobuf's limit."""
    import onnx

    external = sum(len(t.raw_data) for t in model.graph.initializer) >= PROTOBUF_LIMIT

    def write(path: Path) -> None:
        onnx.save_model(model, str(path), save_as_external_data=external,
                        location=f"{output.name}.data", size_threshold=1024)  # fmt: skip

    return _save_atomically(output, external, write)


def _save_atomically(output: Path, external: bool, write: Callable[[Path], None]) -> list[Path]:
    """Write a graph with ``write(path)`` into a temp folder beside ``output``: weights inline
    below protobuf's limit, else beside the graph as ``<name>.data`` (ONNX external data,
    which must travel with the .onnx). The data file is renamed first, the .onnx last.
    Returns the written paths. A stale ``<name>.data`` from an earlier large export is
    removed."""
    output.parent.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory(dir=output.parent, prefix=f".{output.name}.") as temp:
        write(Path(temp) / output.name)
        for path in sorted(Path(temp).iterdir(), key=lambda p: p.suffix == ".onnx"):
            os.chmod(path, 0o644)
            os.replace(path, output.parent / path.name)
            written.append(output.parent / path.name)
    stale = output.with_name(output.name + ".data")
    if not external and stale.exists():
        stale.unlink()
    return written
