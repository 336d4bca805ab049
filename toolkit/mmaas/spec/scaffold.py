"""Write a commented model.yaml for an ONNX model (``mmaas init``).

The text carries the graph's real input and output names (quoted when YAML would read them
as anything but that exact text), KServe v2 datatypes and shapes (``-1`` = dynamic), the
source path with its sha256 pin, and an optimization profile for every input with a
dynamic axis: the batch axis runs 1..``max_batch_size``, other dynamic axes get guesses
(:func:`mmaas.spec.profile.suggest_profile`) that a comment asks the user to adjust, never
below what the graph itself forbids where that can be told (a reflect Pad of p needs the
axis at least p + 1: :mod:`mmaas.spec.graph_limits`). A rank-0 integer input gets a
commented ``sample_values`` line: such an input (a sample rate, a length) often selects a
branch that random values 0..7 would miss.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import yaml

from mmaas.core.errors import SpecError, UsageError
from mmaas.core.files import atomic_write_text
from mmaas.core.hashing import file_digests
from mmaas.core.sample_values import FORMS, counts
from mmaas.spec.graph_limits import axis_minimums
from mmaas.spec.hooks import SpecChecks
from mmaas.spec.load import SPEC_FILE, LoadedSpec, parse_spec
from mmaas.spec.model import NAME_PATTERN
from mmaas.spec.onnx_graph import GraphSignature, GraphTensor, read_signature
from mmaas.spec.profile import suggest_profile
from mmaas.spec.yamlio import load_yaml

DEFAULT_MAX_BATCH_SIZE = 4

_HEADER = """\
# mmaas model spec, written by `mmaas init` from {onnx}.
# Reference: schema/model.schema.json; check it with `mmaas validate <this folder>`.
name: {name}
version: {version}
source:
  path: {source}  # relative to this folder
  sha256: {sha256}
backend: onnxruntime  # onnxruntime (CPU) | tensorrt (NVIDIA GPU)
target_precision: fp32  # onnxruntime: fp32; tensorrt: fp32 tf32 fp16 bf16 int8 fp8
max_batch_size: {max_batch_size}  # 0 = no batch axis; else axis 0 of every input/output
"""
_FOOTER = """\
# Defaults, change as needed:
# build: {workspace: 2048, timing_cache: true}  # TensorRT workspace memory pool in MiB
# runtime: {grpc_port: 8001, metrics_port: 8002, max_message_size: null, instance_count: 1}
# image: {repository: null, tag: null, base_image: "mmaas/base:bookworm", ca_bundle: null}
"""


def scaffold_spec(
    onnx_path: Path,
    name: str,
    *,
    source: str | None = None,
    max_batch_size: int | None = None,
    version: str = "1.0.0",
) -> str:
    """The text of a model.yaml for the ONNX model at ``onnx_path``.

    Args:
        onnx_path: the ONNX file (read for its signature and sha256).
        name: the model name (``name:``).
        source: the text for ``source.path`` (relative to the model folder); default the
            file name.
        max_batch_size: default :data:`DEFAULT_MAX_BATCH_SIZE` when axis 0 of every input
            and output is dynamic, else 0.
        version: the model version (always written quoted).

    Raises:
        SourceError: the ONNX file is missing or invalid.
    """
    graph = read_signature(onnx_path)
    batch = default_max_batch_size(graph) if max_batch_size is None else max_batch_size
    sha256 = file_digests(onnx_path)["sha256"].split(":", 1)[1]
    header = _HEADER.format(
        onnx=onnx_path.name,
        name=yaml_scalar(name),
        version=json.dumps(version),
        source=yaml_scalar(source or onnx_path.name),
        sha256=yaml_scalar(sha256),
        max_batch_size=batch,
    )
    lines = [header]
    lines.append("inputs:\n" if graph.inputs else "inputs: []\n")
    limits = axis_minimums(onnx_path)
    lines.extend(
        _input(
            tensor, batch, {axis: n for (name, axis), n in limits.items() if name == tensor.name}
        )
        for tensor in graph.inputs
    )
    lines.append("outputs:\n")
    lines.extend(_tensor(tensor) for tensor in graph.outputs)
    lines.append(_FOOTER)
    return "".join(lines)


def default_max_batch_size(graph: GraphSignature) -> int:
    """:data:`DEFAULT_MAX_BATCH_SIZE` when axis 0 of every input and output is dynamic
    (Triton's batching convention), else 0 (no batch axis)."""
    tensors = (*graph.inputs, *graph.outputs)
    batchable = all(tensor.shape and tensor.shape[0] == -1 for tensor in tensors)
    return DEFAULT_MAX_BATCH_SIZE if tensors and batchable else 0


def yaml_scalar(text: str) -> str:
    """``text`` as a YAML scalar that reads back as exactly ``text`` under YAML 1.1 and 1.2:
    plain when that is safe (``x``, ``onnx::Conv_1``, ``save_infer_model/scale_0.tmp_1``),
    else double-quoted (``"no"``, ``"1e3"``, ``"a: b"``)."""
    plain = yaml.safe_dump(text, width=sys.maxsize).removesuffix("...\n").strip()
    try:
        same = plain == text and load_yaml(f"k: {plain}\n", "<scalar>").data == {"k": text}
    except SpecError:
        same = False
    return plain if same else json.dumps(text, ensure_ascii=False)


def _tensor(tensor: GraphTensor) -> str:
    shape = (
        "null  # the ONNX model declares none: write it, -1 for dynamic axes"
        if tensor.shape is None
        else _dims(tensor.shape)
    )
    return (
        f"  - name: {yaml_scalar(tensor.name)}\n    datatype: {tensor.datatype}\n"
        f"    shape: {shape}\n"
    )


def _input(tensor: GraphTensor, max_batch_size: int, minimums: dict[int, int]) -> str:
    if tensor.shape == () and counts(tensor.datatype):
        return _tensor(tensor) + (
            "    # a scalar integer: if its value selects a branch (a sample rate, a length,\n"
            "    # an id), the build's checks must not feed it random 0..7: give its values,\n"
            f"    # {FORMS}\n"
            "    # sample_values: 16000\n"
        )
    if tensor.shape is None or not tensor.dynamic_axes:
        return _tensor(tensor)
    declared = ", ".join(
        name or str(dim) for name, dim in zip(tensor.dim_names, tensor.shape, strict=True)
    )
    low, opt, high = suggest_profile(tensor.shape, max_batch_size, minimums)
    guessed = [axis for axis in tensor.dynamic_axes if axis != 0 or max_batch_size == 0]
    notes = [
        f"  # declared [{declared}]\n",
        "  # optimization profile: min <= opt <= max per axis\n",
    ]
    if 0 in tensor.dynamic_axes and max_batch_size > 0:
        notes.append("  # axis 0 is the batch: 1 .. max_batch_size\n")
    if guessed:
        notes.append(f"  # axes {guessed}: guessed sizes, adjust them to the inputs you serve\n")
    for axis, least in sorted(minimums.items()):
        if axis in tensor.dynamic_axes:
            notes.append(
                f"  # axis {axis}: at least {least} (a reflect Pad in the graph needs it)\n"
            )
    return (
        "".join(notes)
        + _tensor(tensor)
        + f"    min: {_dims(low)}\n    opt: {_dims(opt)}\n    max: {_dims(high)}\n"
    )


def _dims(dims: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, dims)) + "]"


def init_model_folder(
    folder: Path,
    onnx_path: Path,
    *,
    checks: SpecChecks,
    name: str | None = None,
    max_batch_size: int | None = None,
    force: bool = False,
) -> LoadedSpec:
    """Write ``folder/model.yaml`` for ``onnx_path`` (``mmaas init``), after checking it
    loads with ``checks`` (:func:`mmaas.build.spec_checks.host_checks`); the ONNX file is
    referenced by a path relative to ``folder``, never copied.

    Raises:
        UsageError: model.yaml exists and ``force`` is not set, or ``name`` (default: the
            folder's name) is not a valid model name.
        SourceError: the ONNX file is missing or invalid.
        SpecError: the generated spec does not load (e.g. ``max_batch_size`` above 1 for a
            model with a fixed batch axis); nothing is written then.
    """
    target = folder / SPEC_FILE
    if target.exists() and not force:
        raise UsageError(f"{target} exists; pass --force to overwrite it")
    name = name or folder.resolve().name
    if not re.match(NAME_PATTERN, name):
        raise UsageError(
            f"{name!r} is not a valid model name (lowercase letters, digits, "
            "'.', '_', '-'); pass --name"
        )
    source = Path(os.path.relpath(onnx_path.resolve(), folder.resolve())).as_posix()
    text = scaffold_spec(onnx_path, name, source=source, max_batch_size=max_batch_size)
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)  # source.path is resolved from the folder
    try:
        loaded = parse_spec(text, target, checks=checks)
    except SpecError:
        if created:
            folder.rmdir()
        raise
    atomic_write_text(target, text)
    return loaded
