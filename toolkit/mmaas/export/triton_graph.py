"""The ONNX graph a Triton model repository gets, and the shapes Triton checks it against.

Which graph (``--device``, default: where the model's back end serves):

* ``cpu``: the image's engine, ONNX Runtime's graph optimized at
  ``build.onnxruntime.graph_optimization_level`` for the CPU (at ``all``: NCHWc layouts
  and CPU-only fused kernels);
* ``gpu``: the source ONNX the image was built from (checked against the manifest's
  sha256): provider-neutral, so Triton's ONNX Runtime optimizes it for the CUDA (or
  TensorRT) provider when it loads it. An optimized CPU graph cannot run there.

Triton's ONNX Runtime back end compares the config with the shapes the graph *declares*
(outputs exactly, inputs with ``-1`` matching any size). Where the served shape of an
output is not the declared one (model.yaml states an output's real shape where the graph
declares another), the shipped graph's output declaration is rewritten to the served
shape (``-1`` axes as symbolic dims), so the config Triton reads advertises the real rank
and the graph agrees; nothing else of the graph changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import onnx

from mmaas.core.errors import IntegrityError
from mmaas.core.hashing import file_digests
from mmaas.core.manifest import FileRecord
from mmaas.spec.onnx_graph import read_signature


def check_source(path: Path, record: FileRecord) -> None:
    """Raise IntegrityError unless ``path`` is the source the image was built from."""
    if file_digests(path)["sha256"] != record.sha256:
        raise IntegrityError(
            f"{path} is not the ONNX file the image was built from (its sha256 differs from "
            f"the manifest's {record.sha256})",
            hint="export from the model folder the image was built from, or rebuild it",
        )


def outputs_to_declare(path: Path, served: Mapping[str, tuple[int, ...]]) -> dict[str, tuple]:
    """The outputs of ``served`` (name -> served shape) whose declaration in the graph at
    ``path`` differs from their served shape (those the shipped graph must redeclare)."""
    declared = {tensor.name: tensor.shape for tensor in read_signature(path).outputs}
    return {name: shape for name, shape in served.items() if declared.get(name) != shape}


def redeclare_outputs(source: Path, target: Path, shapes: Mapping[str, tuple[int, ...]]) -> None:
    """Write ``source``'s graph to ``target`` with the named outputs declared as ``shapes``
    (``-1``: a symbolic dim ``<output>_<axis>``); external data stays referenced by its
    relative location (the files go beside ``target``)."""
    model = onnx.load(str(source), load_external_data=False)
    for output in model.graph.output:
        if output.name not in shapes:
            continue
        shape = output.type.tensor_type.shape
        shape.ClearField("dim")
        for axis, size in enumerate(shapes[output.name]):
            dim = shape.dim.add()
            if size == -1:
                dim.dim_param = f"{output.name}_{axis}"
            else:
                dim.dim_value = size
    onnx.save(model, str(target))
