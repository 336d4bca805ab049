"""The TensorRT latency gate's timer (``TensorRTCompiler.latency_probe``): the exact
``trtexec --loadEngine`` argv, and its figures parsed from the real trtexec logs in
tests/fixtures/trtexec (no GPU here: trtexec cannot run, so argv and parser are the
contract)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from mmaas.backends.tensorrt.builder.latency import latency_argv, latency_figures, latency_inputs
from mmaas.backends.tensorrt.builder.trtexec.log import parse_trtexec_log
from mmaas.core.errors import BuildError
from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.core.sample_values import SampleValues
from paths import FIXTURES

LOGS = FIXTURES / "trtexec"
DET = ModelInfo(
    "det",
    "1",
    "tensorrt",
    "fp16",
    4,
    (
        TensorInfo(
            "x", "FP32", (-1, 3, -1, -1), (1, 3, 32, 32), (1, 3, 640, 640), (4, 3, 1280, 1280)
        ),
    ),
    (TensorInfo("y", "FP32", (-1, 1, -1, -1)),),
)
TWO = ModelInfo(
    "two",
    "1",
    "tensorrt",
    "fp16",
    0,
    (
        TensorInfo("onnx::ids", "INT64", (-1, -1), (1, 1), (1, 16), (1, 64)),
        TensorInfo("scale", "FP32", (), (), (), ()),
    ),
    (TensorInfo("y", "FP32", (-1,)),),
)


def log(name: str, code: int = 0):
    return parse_trtexec_log((LOGS / name).read_text(), code)


def test_argv_times_exactly_the_requested_runs_at_the_gate_shapes() -> None:
    argv = latency_argv("/usr/src/tensorrt/bin/trtexec", Path("/m/model.plan"), DET, "10.13.2.6",
                        {"x": (2, 3, 640, 480)}, 50, 5)  # fmt: skip
    assert argv == [
        "/usr/src/tensorrt/bin/trtexec",
        "--loadEngine=/m/model.plan",
        "--shapes=x:2x3x640x480",
        "--iterations=50",
        "--duration=0",
        "--warmUp=200",
    ]


def test_argv_quotes_colon_names_writes_scalars_and_skips_warmup() -> None:
    shapes = {"onnx::ids": (1, 8), "scale": ()}
    assert latency_argv("trtexec", Path("e.plan"), TWO, "10.14", shapes, 10, 0)[2:] == [
        "--shapes='onnx::ids':1x8,scale:scalar",
        "--iterations=10",
        "--duration=0",
        "--warmUp=0",
    ]


def test_contract_latency_argv_gives_shapes_for_a_shape_pinned_over_dynamic_onnx_axes() -> None:
    """model.yaml's shape [1, 4] may pin axes the ONNX file (and so the
    engine) leaves dynamic; without --shapes trtexec --loadEngine would run them at 1. A
    static binding ignores its entry (sampleInference.cpp), so --shapes is always given."""
    pinned = ModelInfo(
        "s",
        "1",
        "tensorrt",
        "fp32",
        0,
        (TensorInfo("x", "FP32", (1, 4), (1, 4), (1, 4), (1, 4)),),
        (),
    )
    argv = latency_argv("trtexec", Path("e.plan"), pinned, "10.13", {"x": (1, 4)}, 5, 1)
    assert argv == [
        "trtexec", "--loadEngine=e.plan", "--shapes=x:1x4", "--iterations=5", "--duration=0",
        "--warmUp=200",
    ]  # fmt: skip


def test_contract_latency_argv_leaves_out_an_8x_scalar_only_model() -> None:
    scalar = ModelInfo(
        "s", "1", "tensorrt", "fp32", 0, (TensorInfo("t", "FP32", (), (), (), ()),), ()
    )
    argv = latency_argv("trtexec", Path("e.plan"), scalar, "8.6", {"t": ()}, 5, 1)
    assert not any(a.startswith("--shapes") for a in argv)


def test_releases_before_8_5_are_refused() -> None:
    with pytest.raises(BuildError, match=r"needs trtexec 8\.5 or newer"):
        latency_argv("trtexec", Path("e.plan"), DET, "8.4.1", {"x": (1, 3, 64, 64)}, 5, 1)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "trt10.13-pass-dynamic-bf16-excerpt.log",
            (1667.89, 1673.26, 1674.64, 1666.9, 1674.64),
        ),
        (
            "trt10.14-pass-implicit-dynamic-shape-override.log",
            (0.0383301, 0.0395508, 0.046875, 0.0385501, 0.26416),
        ),
        ("trt8.5-pass-dynamic-fp16.log", (9.82507, 9.88892, 9.96838, 9.82231, 10.0364)),
    ],
)
def test_figures_come_from_the_latency_line(name: str, expected: tuple[float, ...]) -> None:
    figures = latency_figures(log(name), 50)
    keys = ("p50_ms", "p90_ms", "p99_ms", "mean_ms", "max_ms")
    assert tuple(figures[k] for k in keys) == expected
    assert (
        figures["timer"].startswith("trtexec --loadEngine: Latency")
        and "50 runs" in figures["timer"]
    )


def test_a_log_without_p90_or_summary_or_a_failed_run_is_an_error() -> None:
    with pytest.raises(BuildError, match="90th and 99th"):
        latency_figures(log("trt8.4-pass-dynamic-fp16-verbose.log"), 5)  # prints only 99 %
    with pytest.raises(BuildError, match="90th and 99th"):
        latency_figures(
            log("trt10.14-pass-dynamic-fp16-timingcache-save-skipinference-verbose.log"), 5
        )
    with pytest.raises(BuildError, match="trtexec --loadEngine failed"):
        latency_figures(log("trt10.16-fail-onnx-parse-plugin-not-found.log", 1), 5)


def test_contract_latency_argv_loads_the_sample_values_of_inputs_that_have_them(
    tmp_path: Path,
) -> None:
    """trtexec times random data unless told: an input with sample values (here 'sr:0',
    INT32 as the engine binds it, the constant 16000) gets --loadInputs with a raw file of
    exactly those values at the gate's shape; the other input stays random."""
    rate = TensorInfo(
        "sr:0", "INT32", (1,), (1,), (1,), (1,), sample_values=SampleValues("constant", (16000,))
    )
    model = replace(DET, inputs=(*DET.inputs, rate))
    shapes = {"x": (1, 3, 64, 64), "sr:0": (1,)}
    files = latency_inputs(model, shapes, tmp_path / "inputs")
    assert list(files) == ["sr:0"]
    assert np.frombuffer(files["sr:0"].read_bytes(), "<i4").tolist() == [16000]
    argv = latency_argv("trtexec", Path("e.plan"), model, "10.13", shapes, 5, 1, files)
    assert argv[-1] == f"--loadInputs='sr:0':{tmp_path / 'inputs' / '1.bin'}"
    assert latency_inputs(DET, {"x": (1, 3, 64, 64)}, tmp_path / "none") == {}
