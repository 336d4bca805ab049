"""The precision an ONNX graph carries, for strongly typed TensorRT builds (TensorRT 11
removed every precision flag: the graph must already hold the target precision).

* :func:`has_qdq`: the graph holds QuantizeLinear/DequantizeLinear nodes (explicit int8 /
  fp8 quantization), so TensorRT can build it strongly typed.
* :func:`convert_fp16`: fp32 -> fp16 autocast with onnxconverter-common's ``float16``
  (graph inputs and outputs stay fp32), then checked against the fp32 graph in ONNX
  Runtime (CPU) at the profile's min and opt shapes within the spec's tolerance. A naive
  conversion can break a model outright (constants beyond fp16's range are clamped), so a
  conversion that fails the check is refused rather than built.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np

from mmaas.core.errors import BuildError
from mmaas.core.manifest import ModelInfo
from mmaas.core.ort_io import has_bfloat16, import_onnxruntime, run_session, session_options
from mmaas.core.samples import sample_inputs

QDQ_OPS = {"QuantizeLinear", "DequantizeLinear"}
CHECK_POINTS = ("min", "opt")


def has_qdq(source: Path) -> bool:
    """True when the ONNX graph at ``source`` holds Q/DQ nodes."""
    import onnx

    graph = onnx.load(str(source), load_external_data=False).graph
    return any(node.op_type in QDQ_OPS for node in graph.node)


def convert_fp16(
    source: Path, target: Path, model: ModelInfo, atol: float, rtol: float
) -> dict[str, Any]:
    """Write the fp16 graph of ``source`` to ``target`` and check it.

    Returns ``{"tool", "max_abs_diff": {point: float}, "atol", "rtol"}`` for the report.

    Raises:
        BuildError: an output differs from the fp32 graph beyond ``atol + rtol * |fp32|``
            (``numpy.allclose``) at a checked point, naming the output and the difference.
    """
    import onnx
    from onnxconverter_common import float16

    with warnings.catch_warnings():  # it warns once per clamped constant
        warnings.simplefilter("ignore")
        converted = float16.convert_float_to_float16(onnx.load(str(source)), keep_io_types=True)
    onnx.save(converted, str(target))
    diffs = {point: _max_diff(source, target, model, point, atol, rtol) for point in CHECK_POINTS}
    return {
        "tool": "onnxconverter_common.float16 (keep_io_types)",
        "max_abs_diff": diffs,
        "atol": atol,
        "rtol": rtol,
    }


def _max_diff(
    source: Path, target: Path, model: ModelInfo, point: str, atol: float, rtol: float
) -> float:
    ort = import_onnxruntime()

    feeds = sample_inputs(model, point)  # type: ignore[arg-type]
    names = [tensor.name for tensor in model.outputs]
    sessions = (
        ort.InferenceSession(str(path), session_options(ort), providers=["CPUExecutionProvider"])
        for path in (source, target)
    )
    want, got = (
        run_session(session, names, feeds, bfloat16=has_bfloat16(session)) for session in sessions
    )
    worst = 0.0
    for name, expected, actual in zip(names, want, got, strict=True):
        difference = float(np.max(np.abs(actual.astype(np.float64) - expected)))
        if not np.allclose(actual, expected, atol=atol, rtol=rtol):
            raise BuildError(
                f"fp16 conversion changes output {name!r} by up to {difference:.4g} at the "
                f"{point} shapes (tolerance atol {atol}, rtol {rtol}): the fp16 graph is "
                "wrong, not just less precise",
                hint="TensorRT 11 builds only strongly typed graphs: export the model in "
                "mixed precision (e.g. ModelOpt AutoCast keeps sensitive nodes in fp32) "
                "or set target_precision: fp32 / tf32",
            )
        worst = max(worst, difference)
    return worst
