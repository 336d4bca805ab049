"""By contract: a shape pinned in model.yaml over axes the ONNX file leaves
dynamic still gives trtexec all three shape flags; trtexec's implicit override ("Dynamic
dimensions required for input ... Automatically overriding shape to") fails the build
naming the input; the profile read back from trtexec's real logs must equal model.yaml's.

TensorRT cannot run here: argvs are compared whole, logs are the real fixture logs (some
with one line edited, which each test says), and the compiler is run against a stand-in
trtexec that prints a real log (the GPU is the boundary that cannot exist here; those
tests say ``fake_gpu`` in their names)."""

from __future__ import annotations

import json
import os
import stat
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from mmaas.backends import CompileRequest
from mmaas.backends.tensorrt.builder import TensorRTCompiler
from mmaas.backends.tensorrt.builder.trtexec.argv import trtexec_argv
from mmaas.backends.tensorrt.builder.trtexec.log import parse_trtexec_log
from mmaas.backends.tensorrt.builder.trtexec.network import network_inputs
from mmaas.backends.tensorrt.builder.trtexec.profile import (
    ProfileShapes,
    ShapeOverride,
    engine_profile,
    profile_mismatches,
)
from mmaas.backends.tensorrt.runtime import TensorRTRuntime
from mmaas.core.errors import BuildError, SpecError
from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.spec.onnx_graph import read_signature
from onnx_builder import FLOAT, TRT_SETTINGS, make_onnx
from paths import FIXTURES

LOGS = FIXTURES / "trtexec"
IMPLICIT = "trt10.14-pass-implicit-dynamic-shape-override.log"
TIMING_CACHE = "trt10.14-pass-dynamic-fp16-timingcache-save-skipinference-verbose.log"
MNIST = ((1, 1, 28, 28), (4, 1, 28, 28), (16, 1, 28, 28))  # the cookbook logs' profile


def model(*inputs: TensorInfo, precision: str = "fp16") -> ModelInfo:
    return ModelInfo("m", "1", "tensorrt", precision, 0, inputs, (TensorInfo("y", "FP32", (-1,)),))


def pinned(name: str, dims: tuple[int, ...]) -> TensorInfo:
    """An input model.yaml pins with ``shape:`` (completion sets min = opt = max = it)."""
    return TensorInfo(name, "FP32", dims, dims, dims, dims)


def argv(info: ModelInfo, network: dict | None, version: str = "10.13") -> list[str]:
    return trtexec_argv(info, TRT_SETTINGS, version, "m.onnx", "model.plan", network=network)


def shape_flags(args: list[str]) -> list[str]:
    return [a for a in args if a.split("=")[0] in ("--minShapes", "--optShapes", "--maxShapes")]


def test_contract_argv_shape_pinned_over_dynamic_onnx_axes_gets_all_three_shape_flags(
    tmp_path: Path,
) -> None:
    onnx = make_onnx(tmp_path / "m.onnx", [("x", FLOAT, ["N", 3, "H", "W"])])
    info = model(pinned("x", (1, 3, 640, 640)))
    assert shape_flags(argv(info, network_inputs(onnx))) == [
        "--minShapes=x:1x3x640x640",
        "--optShapes=x:1x3x640x640",
        "--maxShapes=x:1x3x640x640",
    ]
    assert shape_flags(argv(info, None)) == []  # what the served shape alone would say


def test_contract_argv_one_pinned_dynamic_input_brings_every_input_into_the_flags(
    tmp_path: Path,
) -> None:
    """min = opt = max written over a dynamic axis, next to an input static in the ONNX
    file (trtexec ignores a static input's entry; its name must still be an input)."""
    onnx = make_onnx(tmp_path / "m.onnx", [("ids", FLOAT, [1, "seq"]), ("mask", FLOAT, [1, 8])])
    info = model(TensorInfo("ids", "FP32", (1, -1), (1, 8), (1, 8), (1, 8)), pinned("mask", (1, 8)))
    assert shape_flags(argv(info, network_inputs(onnx), "8.6")) == [
        "--minShapes=ids:1x8,mask:1x8",
        "--optShapes=ids:1x8,mask:1x8",
        "--maxShapes=ids:1x8,mask:1x8",
    ]


def test_contract_argv_static_onnx_file_gets_no_shape_flags(tmp_path: Path) -> None:
    onnx = make_onnx(tmp_path / "m.onnx", [("x", FLOAT, [1, 3, 64, 64])])
    assert shape_flags(argv(model(pinned("x", (1, 3, 64, 64))), network_inputs(onnx))) == []


def test_contract_argv_refuses_a_dynamic_onnx_input_without_a_profile() -> None:
    bare = TensorInfo("x", "FP32", (1, 3))  # no min/opt/max at all
    with pytest.raises(SpecError) as caught:
        argv(model(bare), {"x": (-1, 3)})
    assert "input 'x' has dynamic dims but no min/opt/max" in str(caught.value)


def test_network_inputs_reads_the_dims_trtexec_parses(tmp_path: Path) -> None:
    onnx = make_onnx(
        tmp_path / "m.onnx",
        [("a:0", FLOAT, ["batch", 0, -1, 7]), ("b", FLOAT, [None, 2]), ("c", FLOAT, None)],
        weights_as_inputs=["w"],
    )
    assert network_inputs(onnx) == {"a:0": (-1, -1, -1, 7), "b": (-1, 2)}


def test_network_inputs_agree_with_the_hosts_graph_reader_on_the_real_models(
    ppocr_models: dict[str, Path],
) -> None:
    """The builder's reader and spec validation's (mmaas.spec.onnx_graph) see one graph."""
    for onnx in ppocr_models.values():
        host = read_signature(onnx)
        assert network_inputs(onnx) == {t.name: t.shape for t in host.inputs}


def log(name: str, text: str | None = None, code: int = 0):
    return parse_trtexec_log(text if text is not None else (LOGS / name).read_text(), code)


def test_real_logs_give_the_engine_profile_back() -> None:
    built = engine_profile(log(TIMING_CACHE).profile)
    assert built == {"x": ProfileShapes("x", 0, *MNIST, "builder")}
    two = log("trt10.16-pass-dynamic-2profiles-fp16-skipinference.log").profile
    assert engine_profile(two, 1)["x"] == ProfileShapes(
        "x", 1, (8, 1, 28, 28), (32, 1, 28, 28), (64, 1, 28, 28), "builder"
    )
    old = engine_profile(log("trt8.2-fail-dynamic-fp16-stdout-only.log").profile)
    assert old == {"x:0": ProfileShapes("x:0", 0, *MNIST, "options")}  # 8.x: options echo
    det = engine_profile(log("trt8.5-pass-dynamic-fp16.log").profile)["images"]
    assert (det.min, det.opt, det.max) == ((1, 3, 640, 640), (4, 3, 640, 640), (8, 3, 640, 640))


def test_real_implicit_override_log_names_the_input_as_a_mismatch() -> None:
    parsed = log(IMPLICIT)
    assert parsed.passed  # trtexec itself calls it a success
    assert parsed.shape_overrides == (ShapeOverride("x", (1, 1, 28, 28)),)
    asked = model(TensorInfo("x", "FP32", (-1, 1, 28, 28), *MNIST))
    problems = profile_mismatches(
        parsed.profile, parsed.shape_overrides, asked, {"x": (-1, 1, 28, 28)}
    )
    assert problems == [
        "input 'x': trtexec got no shapes for it and pinned it to 1x1x28x28 (\"Dynamic "
        'dimensions required for input: x, ... Automatically overriding shape to"): the '
        "engine would take that one shape only"
    ]


def test_profile_read_back_equals_model_yaml_or_says_how_it_differs() -> None:
    parsed = log(TIMING_CACHE)
    network = {"x": (-1, 1, 28, 28)}
    same = model(TensorInfo("x", "FP32", (-1, 1, 28, 28), *MNIST))
    assert profile_mismatches(parsed.profile, parsed.shape_overrides, same, network) == []
    other = model(TensorInfo("x", "FP32", (-1, 1, 28, 28), MNIST[0], MNIST[1], (32, 1, 28, 28)))
    assert profile_mismatches(parsed.profile, (), other, network) == [
        "input 'x': the engine's profile is min 1x1x28x28, opt 4x1x28x28, max 16x1x28x28; "
        "model.yaml asks min 1x1x28x28, opt 4x1x28x28, max 32x1x28x28"
    ]
    missing = model(TensorInfo("y:0", "FP32", (-1, 2), (1, 2), (2, 2), (4, 2)))
    assert profile_mismatches(parsed.profile, (), missing, {"y:0": (-1, 2)}) == [
        "input 'y:0': trtexec's log shows no optimization profile for it; model.yaml asks "
        "min 1x2, opt 2x2, max 4x2"
    ]
    static = model(pinned("s", (1, 4)))  # static in the network: trtexec sets no profile
    assert profile_mismatches(parsed.profile, (), static, {"s": (1, 4)}) == []


FAKE_TRTEXEC = """#!{python}
# Stand-in for trtexec (no GPU here): records its argv and working directory, writes the
# engine and the timing cache the argv names, and prints the log it is given.
import json, os, sys
from pathlib import Path
args = sys.argv[1:]
Path(os.environ["FAKE_RECORD"]).write_text(json.dumps({{"cwd": os.getcwd(), "argv": args}}))
Path("model.plan").write_bytes(b"plan")
for arg in args:
    if arg.startswith("--timingCacheFile="):
        Path(arg.split("=", 1)[1]).write_bytes(b"t" * int(os.environ["FAKE_CACHE_BYTES"]))
sys.stdout.write(Path(os.environ["FAKE_LOG"]).read_text())
"""


@pytest.fixture
def fake_trtexec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A trtexec on PATH that prints ``FAKE_LOG``; returns the record file it writes."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "trtexec"
    script.write_text(FAKE_TRTEXEC.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_RECORD", str(tmp_path / "record.json"))
    monkeypatch.setenv("FAKE_CACHE_BYTES", "107327")
    return tmp_path / "record.json"


class FakeGpuRuntime(TensorRTRuntime):
    """The TensorRT runtime's host description of an A10 with TensorRT 10.13.2."""

    def describe(self) -> dict[str, Any]:
        gpu = {"name": "NVIDIA A10", "compute_capability": "8.6"}
        return {"name": "tensorrt", "version": "10.13.2.6", "gpu": gpu, "problem": None}


class FakeGpuCompiler(TensorRTCompiler):
    """The TensorRT compiler on a described A10 (no GPU exists here)."""

    runtime = FakeGpuRuntime()


def mnist_request(tmp_path: Path, network_dims: list, profile=MNIST) -> CompileRequest:
    onnx = make_onnx(tmp_path / "build" / "model" / "m.onnx", [("x", FLOAT, network_dims)])
    info = model(TensorInfo("x", "FP32", (-1, 1, 28, 28), *profile))
    settings = replace(TRT_SETTINGS, workspace_mib=1, timing_run=False)
    return CompileRequest(info, onnx, tmp_path / "engine", settings, tmp_path / "caches")


def test_fake_gpu_compile_fails_naming_the_input_trtexec_pinned(
    tmp_path: Path, fake_trtexec: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_LOG", str(LOGS / IMPLICIT))  # the real log, unedited
    request = mnist_request(tmp_path, ["N", 1, 28, 28])
    with pytest.raises(BuildError) as caught:
        FakeGpuCompiler().compile(request)
    text = str(caught.value)
    assert text.startswith("the engine's optimization profile is not model.yaml's:\n")
    assert "input 'x': trtexec got no shapes for it and pinned it to 1x1x28x28" in text
    ran = json.loads(fake_trtexec.read_text())["argv"]
    assert "--minShapes=x:1x1x28x28" in ran and "--maxShapes=x:16x1x28x28" in ran


def test_fake_gpu_compile_runs_the_command_render_prints_in_the_engine_directory(
    tmp_path: Path, fake_trtexec: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 10.14 timing-cache log, with one line edited: its workspace (1024 *bytes* in
    the cookbook's command) reads 1 MiB, the workspace this request asks."""
    text = (
        (LOGS / TIMING_CACHE)
        .read_text()
        .replace("Memory Pools: workspace: 0.000976562 MiB", "Memory Pools: workspace: 1 MiB")
    )
    (tmp_path / "run.log").write_text(text)
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "run.log"))
    request = mnist_request(tmp_path, ["N", 1, 28, 28])
    result = FakeGpuCompiler().compile(request)
    record = json.loads(fake_trtexec.read_text())
    assert record["cwd"] == str(request.out_dir)
    assert result.command[0] == str(tmp_path / "bin" / "trtexec")
    assert result.command[1:] == record["argv"]
    assert record["argv"] == [
        f"--onnx={request.source}",
        "--saveEngine=model.plan",
        "--minShapes=x:1x1x28x28",
        "--optShapes=x:4x1x28x28",
        "--maxShapes=x:16x1x28x28",
        "--memPoolSize=workspace:1",
        "--fp16",
        "--builderOptimizationLevel=3",
        "--hardwareCompatibilityLevel=none",
        "--timingCacheFile=trtexec/timing.cache",
        "--skipInference",
        "--profilingVerbosity=detailed",
        "--exportLayerInfo=trtexec/layers.json",
    ]
    cache = result.report["timing_cache"]
    assert (cache["status"], cache["reused"], cache["stored_bytes"]) == ("new", False, 107327)
