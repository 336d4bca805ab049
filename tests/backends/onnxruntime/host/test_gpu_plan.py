"""ONNX Runtime on a GPU, what runs without one: the device rules of model.yaml, the rendered
GPU Dockerfile (hadolint), the compile of a GPU engine on the CPU, the C34 preflight with
the CPU onnxruntime, and the CPU fallback a model.yaml may allow."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from scripts.gpu_models import write_gpu_model

from mmaas.backends.onnxruntime.runtime import EXECUTION_FILE, OnnxRuntimeRuntime
from mmaas.build.context import plan_builds
from mmaas.build.local import compile_local
from mmaas.build.render import render_dockerfile
from mmaas.build.spec_checks import host_checks
from mmaas.core import proc
from mmaas.core.errors import CompatibilityError, SpecError
from mmaas.core.manifest import read_manifest
from mmaas.spec.load import load_spec
from paths import ROOT

DET = ROOT / "models" / "ppocr-det"
HADOLINT = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))


def gpu_det(tmp_path: Path, **options) -> Path:
    return write_gpu_model(DET, tmp_path / "ppocr-det", **options)


def problems(
    tmp_path: Path, extra: str, precision: str = "fp32", device: str = "gpu", graphs: bool = True
) -> list[str]:
    folder = gpu_det(tmp_path, precision=precision, extra_build=extra, graphs=graphs)
    text = (folder / "model.yaml").read_text().replace("device: gpu", f"device: {device}")
    (folder / "model.yaml").write_text(text)
    with pytest.raises(SpecError) as caught:
        load_spec(folder, checks=host_checks())
    return [p.message for p in caught.value.problems]


def test_combinations_that_cannot_work_are_refused_at_their_keys(
    ppocr_models, tmp_path: Path
) -> None:
    assert any(
        "cuda_graphs needs a GPU instance" in m for m in problems(tmp_path, "", device="cpu")
    )
    int8 = problems(tmp_path / "a", ", execution_accelerator: tensorrt", "int8", graphs=False)
    assert int8 == [
        "int8 needs a calibration source: set build.tensorrt.calibration_cache "
        "(the TensorRT provider's calibration table, beside the ONNX file)"
    ]
    cuda_int8 = problems(tmp_path / "b", "", "int8")
    assert "execution_accelerator cuda does not run int8" in cuda_int8[0]
    trt_graphs = problems(tmp_path / "c", ", execution_accelerator: tensorrt")
    assert trt_graphs == [
        "CUDA graphs are captured by the CUDA provider; set "
        "execution_accelerator: cuda or cuda_graphs: false"
    ]
    outside = problems(tmp_path / "d", ", cuda_graph_shapes: [{x: 16x3x640x640}]")
    assert outside == [
        "shape [16, 3, 640, 640] is outside the optimization profile (min "
        "[1, 3, 32, 32], max [4, 3, 1280, 1280]); a graph replays only at its "
        "captured shape, so capture shapes inside it"
    ]
    unknown = problems(tmp_path / "e", ", cuda_graph_shapes: [{y: 1x3x64x64}]")
    assert unknown[0] == "a captured graph needs every input's shape; missing 'x'"


def test_default_graph_shapes_are_the_opt_batch_each_preferred_size_and_the_max(
    ppocr_models, tmp_path: Path
) -> None:
    from mmaas.backends import get_target

    folder = gpu_det(tmp_path, max_batch=8, preferred=(4, 6))
    gpu = (
        get_target("onnxruntime").engine_settings(load_spec(folder, checks=host_checks()).spec).gpu
    )
    assert gpu is not None
    assert [s["x"] for s in gpu.graph_shapes] == [(b, 3, 640, 640) for b in (1, 4, 6, 8)]


@pytest.mark.parametrize("buildkit", [True, False], ids=["buildkit", "legacy"])
@pytest.mark.parametrize("phase", ["compile", "package"])
def test_rendered_gpu_dockerfile_passes_hadolint_and_orders_its_layers(
    ppocr_models, tmp_path: Path, buildkit: bool, phase: str
) -> None:
    _, compiles, package = plan_builds(gpu_det(tmp_path), buildkit=buildkit)
    plan = package if phase == "package" else compiles["model"]
    text = render_dockerfile(plan)
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(text)
    result = proc.run([HADOLINT, "--no-color", str(dockerfile)], check=False, what="hadolint")
    assert result.returncode == 0, result.stdout + result.stderr
    assert plan.template == "Dockerfile.onnxruntime-gpu.j2"
    assert "onnxruntime-gpu" in plan.generated["requirements-builder.txt"]
    assert "nvidia-ml-py" in plan.generated["requirements-runtime.txt"]
    if phase == "package":
        order = [
            "FROM python AS serving",
            "nvidia-cudnn-cu13==9.19.0.56",
            "LD_LIBRARY_PATH",
            "requirements-runtime.txt",
            "COPY --from=builder /opt/mmaas/engine/",
            "COPY wheels/runtime/",
            "manifest.json",
            "FROM python AS sbom-tool",
            "FROM serving AS sbom",
            "FROM serving AS runtime",
            "COPY --from=sbom /opt/mmaas/sbom.cdx.json",
            "io.mmaas.cuda.version=",
            "USER 10001",
        ]
        positions = [text.index(marker, text.index("FROM python AS serving")) for marker in order]
        assert positions == sorted(positions)


@pytest.fixture(scope="module")
def gpu_engine_dir(ppocr_models, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A GPU engine compiled here: the builder's check runs on the CPU provider."""
    folder = write_gpu_model(DET, tmp_path_factory.mktemp("gpu") / "ppocr-det", max_batch=8)
    return compile_local(folder)[1]


def test_a_gpu_engine_compiles_at_basic_level_with_its_execution_file(gpu_engine_dir: Path) -> None:
    manifest = read_manifest(gpu_engine_dir)
    assert [r.path for r in manifest.engine_data] == ["model.ort.onnx.data", EXECUTION_FILE]
    assert manifest.report["compile"]["graph_optimization_level"] == "basic"
    assert manifest.report["compile"]["device"] == "gpu"
    recorded = json.loads((gpu_engine_dir / EXECUTION_FILE).read_text())
    assert recorded["gpu"]["accelerator"] == "cuda" and recorded["gpu"]["cuda_graphs"] is True
    assert [p["point"] for p in manifest.report["profile_check"]] == ["min", "opt", "max"]


def test_cpu_onnxruntime_refuses_a_gpu_engine_naming_the_cause_c34(gpu_engine_dir: Path) -> None:
    assert "CUDAExecutionProvider" not in ort.get_available_providers()
    with pytest.raises(CompatibilityError) as caught:
        OnnxRuntimeRuntime().load(gpu_engine_dir, read_manifest(gpu_engine_dir))
    assert caught.value.message.startswith(
        "GPU instance not ready: this onnxruntime has no CUDA provider (the CPU onnxruntime "
        "is installed instead of onnxruntime-gpu"
    )
    assert "allow_cpu_fallback" in (caught.value.hint or "")


def test_allow_cpu_fallback_serves_on_the_cpu_and_says_why(
    ppocr_models, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = gpu_det(tmp_path, graphs=False, extra_build=", allow_cpu_fallback: true")
    engine_dir = compile_local(folder)[1]
    engine = OnnxRuntimeRuntime().load(engine_dir, read_manifest(engine_dir))
    assert engine.facts["providers"] == ["CPUExecutionProvider"]
    assert "no CUDA provider" in engine.facts["fallback"]
    assert "serving on CPUExecutionProvider, not the GPU" in caplog.text
    x = np.random.default_rng(0).random((1, 3, 64, 64), dtype=np.float32)
    out = engine.infer({"x": x}, ["sigmoid_0.tmp_0"])["sigmoid_0.tmp_0"]
    expected = ort.InferenceSession(str(DET / "ch_PP-OCRv4_det_infer.onnx")).run(None, {"x": x})[0]
    assert np.abs(out - expected).max() <= 1e-4
