"""``mmaas validate`` of TensorRT specs, as real CLI subprocesses: it
builds the trtexec argv for the pinned release, prints it, and reports what that release
refuses with the file, line and key, before any image is built. TensorRT cannot run here:
these are contract tests of the argv."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mmaas.core import proc
from onnx_builder import FLOAT, make_onnx

MMAAS = str(Path(sys.executable).with_name("mmaas"))


def spec(folder: Path, build: str, shape: str = "[1, 3, 64, 64]") -> Path:
    """A TensorRT model whose ONNX input is dynamic in every axis but the channels, with
    ``shape`` written in model.yaml (pinned by default) and a ``build:`` line."""
    make_onnx(folder / "m.onnx", [("image:0", FLOAT, ["N", 3, "H", "W"])])
    (folder / "model.yaml").write_text(
        "name: pinned\n"
        'version: "1"\n'
        "source: {path: m.onnx}\n"
        "backend: tensorrt\n"
        "target_precision: fp16\n"
        "max_batch_size: 0\n"
        "inputs:\n"
        "  - name: image:0\n"
        f"    shape: {shape}\n"
        f"{build}\n"
    )
    return folder


def validate(folder: Path, *args: str):
    return proc.run([MMAAS, "validate", str(folder), *args], check=False)


def test_contract_validate_prints_the_trtexec_argv_with_the_pinned_shape(tmp_path: Path) -> None:
    """The ONNX file leaves N, H and W dynamic; model.yaml pins 1x3x64x64: trtexec still
    gets all three shapes (else it would pin N, H and W to 1)."""
    folder = spec(tmp_path, 'build: {tensorrt: {version: "10.14"}}')
    done = validate(folder, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["engine_command"] == [
        "/usr/src/tensorrt/bin/trtexec",
        "--onnx=/opt/mmaas/build/model/m.onnx",
        "--saveEngine=model.plan",
        "--minShapes='image:0':1x3x64x64",
        "--optShapes='image:0':1x3x64x64",
        "--maxShapes='image:0':1x3x64x64",
        "--memPoolSize=workspace:2048M",
        "--fp16",
        "--builderOptimizationLevel=3",
        "--hardwareCompatibilityLevel=none",
        "--timingCacheFile=trtexec/timing.cache",
        "--profilingVerbosity=detailed",
        "--exportLayerInfo=trtexec/layers.json",
        "--exportTimes=trtexec/times.json",
        "--exportProfile=trtexec/profile.json",
    ]
    text = validate(folder).stdout
    assert "  compile: /usr/src/tensorrt/bin/trtexec --onnx=/opt/mmaas/build/model/m.onnx" in text


def test_contract_validate_reports_what_the_pinned_release_refuses_located(
    tmp_path: Path,
) -> None:
    folder = spec(
        tmp_path,
        "build:\n"
        "  tensorrt:\n"
        '    version: "8.5"\n'
        "    builder_optimization_level: 5\n"
        "    version_compatible: true\n"
        "    gpu_targets: [ampere]",
    )
    done = validate(folder)
    assert done.returncode == 2, done.stdout + done.stderr
    spec_file = folder / "model.yaml"
    assert done.stderr.splitlines()[1:] == [
        f"  {spec_file}:13:33: build.tensorrt.builder_optimization_level: trtexec of TensorRT "
        "8.4.x-era releases has no --builderOptimizationLevel; use a newer "
        "build.tensorrt.version or drop the setting",
        f"  {spec_file}:14:25: build.tensorrt.version_compatible: trtexec of TensorRT 8.4.x-era "
        "releases has no --versionCompatible; use a newer build.tensorrt.version or drop "
        "the setting",
        f"  {spec_file}:15:19: build.tensorrt.gpu_targets[0]: 'ampere' is not a GPU target; "
        "write sm<compute capability>, e.g. sm86 or sm90",
    ]
    assert done.stderr.startswith("error: 3 problems in the model spec:")


def test_contract_validate_refuses_a_version_no_trtexec_table_row_covers(tmp_path: Path) -> None:
    folder = spec(tmp_path, 'build: {tensorrt: {version: "7.2"}}')
    done = validate(folder, "--json")
    assert done.returncode == 2
    problems = json.loads(done.stdout)["problems"]
    assert [p["key_path"] for p in problems] == ["build.tensorrt.version"]
    assert "TensorRT 7.2 is not supported" in problems[0]["message"]
    assert problems[0]["line"] == 10  # the build: line (the key sits inside its flow map)
