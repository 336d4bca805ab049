"""The TensorRT back end's latency timer for the build's latency gate
(:mod:`mmaas.stage.latency`): ``trtexec --loadEngine`` times the built engine.

Flags (trtexec's option parser, ``samples/common/sampleOptions.cpp``):
``--loadEngine=FILE``; ``--shapes=name:AxB,...`` at the gate's shapes (the same spelling
as ``--optShapes``), always: whether an engine binding is dynamic is the engine's own
business (an axis model.yaml pins may be dynamic in the ONNX file and so in the engine), and
trtexec's inference set-up (``setUpInference`` in ``sampleInference.cpp``) looks the shapes
up for dynamic bindings only, so a static one ignores its entry (the "static model does not
take explicit shapes" refusal is the builder's, which ``--loadEngine`` never runs);
``--iterations=N`` with ``--duration=0`` so exactly N timed inferences run (the default is
at least 3 s); ``--warmUp=MS`` (trtexec warms up for a time, in ms, not a
count: 0 when the gate asks no warm-up, else trtexec's own default of 200 ms). No
``--percentile``: trtexec's default set (90, 95, 99 %) has the gate's p90 and p99 from 8.5
on (the 8.5.0, 10.13 and 10.14 fixture logs print them; the 8.4.1 one prints only 99 %,
so the gate refuses releases before 8.5). The figures come from the performance
summary's ``Latency:`` line (host-measured, input copies included) via
:mod:`mmaas.backends.tensorrt.builder.trtexec.log`. trtexec feeds random data unless told
otherwise, so the inputs with sample values in model.yaml get ``--loadInputs=name:FILE``
(raw little-endian data in the binding's datatype; a name holding ``:`` quoted as in the
shape flags) with the same arrays the other gates use (:func:`latency_inputs`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from mmaas.backends.tensorrt.builder.trtexec.log import TrtexecLog
from mmaas.backends.tensorrt.builder.trtexec.shapes import shape_spec
from mmaas.backends.tensorrt.runtime.releases import parse_version, trtexec_flags
from mmaas.core.errors import BuildError
from mmaas.core.manifest import ModelInfo
from mmaas.core.samples import sample_inputs

WARMUP_MS = 200  # trtexec's default --warmUp
PERCENTILES = (90.0, 99.0)
TIMER = "trtexec --loadEngine: Latency (host-measured, H2D + compute + D2H), {runs} runs"


def latency_argv(
    trtexec: str,
    engine: Path,
    model: ModelInfo,
    version: str,
    shapes: Mapping[str, tuple[int, ...]],
    runs: int,
    warmup: int,
    inputs: Mapping[str, Path] | None = None,
) -> list[str]:
    """The trtexec argv that times ``engine`` (TensorRT ``version``) ``runs`` times at
    ``shapes`` (input name -> dims), with ``inputs`` (input name -> raw data file, from
    :func:`latency_inputs`) loaded instead of random data.

    Raises:
        BuildError: ``version`` is older than 8.5 (one percentile only).
        UsageError: ``version`` is not a TensorRT release mmaas knows.
    """
    flags = trtexec_flags(version)
    if parse_version(version) < (8, 5):
        raise BuildError(
            f"the latency gate needs trtexec 8.5 or newer (90th and 99th percentiles); "
            f"this engine was built with TensorRT {version}",
            hint="drop checks.latency or build with a newer TensorRT release",
        )
    at = tuple(replace(t, opt=tuple(shapes[t.name])) for t in model.inputs)
    spec = shape_spec(at, "opt", flags.scalar_shapes)
    return [
        trtexec,
        f"--loadEngine={engine}",
        *([f"--shapes={spec}"] if spec else []),
        f"--iterations={runs}",
        "--duration=0",
        f"--warmUp={WARMUP_MS if warmup else 0}",
        *([f"--loadInputs={_files(inputs)}"] if inputs else []),
    ]


def latency_inputs(
    model: ModelInfo, shapes: Mapping[str, tuple[int, ...]], folder: Path
) -> dict[str, Path]:
    """Write the sample-values array of every input that has them, at ``shapes``, in its
    datatype (``model``: the engine's bindings), to ``folder/<index>.bin``; return input
    name -> file (empty when no input has sample values).

    Raises:
        InputError: a sample value does not fit the binding's datatype.
    """
    at = replace(model, inputs=tuple(replace(t, opt=tuple(shapes[t.name])) for t in model.inputs))
    arrays = sample_inputs(at, "opt")
    files = {}
    for index, tensor in enumerate(model.inputs):
        if tensor.sample_values is None:
            continue
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{index}.bin"
        array = arrays[tensor.name]
        path.write_bytes(np.ascontiguousarray(array, array.dtype.newbyteorder("<")).tobytes())
        files[tensor.name] = path
    return files


def _files(inputs: Mapping[str, Path]) -> str:
    return ",".join(
        f"{chr(39) + name + chr(39) if ':' in name else name}:{path}"
        for name, path in inputs.items()
    )


def latency_figures(log: TrtexecLog, runs: int) -> dict[str, Any]:
    """``{"p50_ms", "p90_ms", "p99_ms", "mean_ms", "max_ms", "timer"}`` (ms) from a passed
    run's ``Latency:`` line (p50 is its median).

    Raises:
        BuildError: the run failed (its ``[E]`` lines), or printed no latency summary or
            not the 90th and 99th percentiles.
    """
    if not log.passed:
        raise BuildError(f"trtexec --loadEngine failed: {log.why()}")
    stats = log.latency
    percentiles = dict(stats.percentiles) if stats else {}
    if stats is None or not all(p in percentiles for p in PERCENTILES):
        raise BuildError(
            "trtexec --loadEngine printed no Latency line with the 90th and 99th "
            "percentiles (was it run with --skipInference, or by trtexec before 8.5?)"
        )
    return {
        "p50_ms": stats.median_ms,
        "p90_ms": percentiles[90.0],
        "p99_ms": percentiles[99.0],
        "mean_ms": stats.mean_ms,
        "max_ms": stats.max_ms,
        "timer": TIMER.format(runs=runs),
    }
