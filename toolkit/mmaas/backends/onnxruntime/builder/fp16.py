"""``target_precision: fp16`` for the CUDA provider: an fp16 conversion of the ONNX graph
(onnxconverter-common's ``convert_float_to_float16``, inputs and outputs kept fp32 so the
served signature does not change), made in the builder stage.

The graph is converted AFTER ONNX Runtime's basic optimization (the engine file), which
folds each BatchNormalization into its Conv: converted unfused, PP-OCRv4 det is wrong on
the H200 (max abs diff 1.0, 10% of the pixels flip at the DB threshold), because a BN
variance of 9.8e7 is clamped to fp16's range while the conv output near 1e4 sits at its
edge; fused, the same model is off by 1.4e-4 on average (0.013% of the pixels flip).
A graph whose ``Cast(to=FLOAT)`` the converter retypes is refused by ONNX Runtime ("Type
(tensor(float16)) of output arg ... does not match expected type"): it is converted again
with ``Cast`` kept in fp32 (only then: with Cast in the block list the converter does not
finish on PP-OCRv4 det). The build's accuracy gate then measures the converted engine
against ONNX Runtime on the original fp32 graph.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import onnx
import onnxruntime as ort
from onnxconverter_common import float16

from mmaas.core.errors import BuildError


def convert_to_fp16(engine: Path, data_file: str, min_external_bytes: int) -> str:
    """Convert the optimized graph ``engine`` (its weights in ``data_file`` beside it, when
    any) to fp16 in place; returns the op block list used, as text.

    Raises:
        BuildError: ONNX Runtime refuses the converted graph with either block list.
    """
    model = onnx.load(str(engine))
    error = ""
    for extra in ([], ["Cast"]):
        block = [*float16.DEFAULT_OP_BLOCK_LIST, *extra]
        with warnings.catch_warnings():  # one warning per clamped constant
            warnings.simplefilter("ignore")
            converted = float16.convert_float_to_float16(
                model, keep_io_types=True, op_block_list=block
            )
        try:
            ort.InferenceSession(converted.SerializeToString(), providers=["CPUExecutionProvider"])
        except Exception as exc:  # ORT's own error type
            error = str(exc)
            continue
        _save(converted, engine, data_file, min_external_bytes)
        return "default" if not extra else "default+Cast"
    raise BuildError(
        f"ONNX Runtime refuses the fp16 conversion of the graph: {error}",
        hint="set target_precision: fp32 (or tf32), or use execution_accelerator: tensorrt",
    )


def _save(model: onnx.ModelProto, engine: Path, data_file: str, min_bytes: int) -> None:
    """The same layout as the fp32 engine: initializers of ``min_bytes`` or more in
    ``data_file`` (the file is rewritten, not appended to)."""
    (engine.parent / data_file).unlink(missing_ok=True)
    onnx.save_model(
        model, str(engine), save_as_external_data=True, location=data_file, size_threshold=min_bytes
    )
