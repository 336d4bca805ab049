"""The TensorRT back end where no GPU exists: real refusals on this machine, and the
start-up compatibility contract (C9, C10, C12) against a fake GPU description (the GPU is
the one boundary that cannot exist here; those tests say so in their names)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from mmaas.backends import CompileRequest, get_compiler, get_runtime
from mmaas.backends.tensorrt.runtime import TensorRTRuntime
from mmaas.backends.tensorrt.runtime.preflight import main as stage_main
from mmaas.core.errors import BuildError, CompatibilityError
from mmaas.core.manifest import FileRecord, Manifest, ModelInfo, TensorInfo
from onnx_builder import TRT_SETTINGS

NO_GPU_HERE = shutil.which("nvidia-smi") is None
MODEL = ModelInfo(
    "m",
    "1",
    "tensorrt",
    "fp16",
    0,
    (TensorInfo("x", "FP32", (-1, 4), (1, 4), (2, 4), (4, 4)),),
    (TensorInfo("y", "FP32", (-1, 4)),),
)
A10 = {"name": "NVIDIA A10", "compute_capability": "8.6"}
T4 = {"name": "Tesla T4", "compute_capability": "7.5"}
L4 = {"name": "NVIDIA L4", "compute_capability": "8.9"}


class FakeGpuBackend(TensorRTRuntime):
    """TensorRTRuntime whose host description is given (no GPU exists here)."""

    def __init__(self, here: dict[str, Any]) -> None:
        self.here = here

    def describe(self) -> dict[str, Any]:
        return self.here


def facts(
    gpu: dict | None, version: str = "10.13.2.6", driver: str = "580.65.06", cuda: str = "13.0.0"
) -> dict[str, Any]:
    return {
        "name": "tensorrt",
        "version": version,
        "gpu": gpu,
        "driver_version": driver,
        "driver_cuda": "13.0",
        "cuda_version": cuda,
        "min_driver": "580.65.06",
        "problem": None if gpu else "nvidia-smi not found",
    }


def manifest(built: dict[str, Any], level: str = "none", vc: bool = False) -> Manifest:
    record = FileRecord("model.plan", "blake3:0", "sha256:0", 1)
    return Manifest(
        model=MODEL,
        engine=record,
        source=record,
        spec_digest="sha256:0",
        backend=built,
        build={},
        report={
            "compile": {
                "portability": {"hardware_compatibility_level": level, "version_compatible": vc}
            }
        },
    )


def test_registered_and_importable_without_tensorrt() -> None:
    assert isinstance(get_runtime("tensorrt"), TensorRTRuntime)


@pytest.mark.skipif(not NO_GPU_HERE, reason="asserts the no-GPU refusal; this host has a GPU")
def test_compile_without_gpu_refuses_before_trtexec_naming_the_routes(tmp_path: Path) -> None:
    request = CompileRequest(
        MODEL,
        tmp_path / "m.onnx",
        tmp_path / "out",
        replace(TRT_SETTINGS, workspace_mib=64),
    )
    with pytest.raises(BuildError) as caught:
        get_compiler("tensorrt").compile(request)
    text = str(caught.value)
    assert text.startswith("no NVIDIA GPU is visible here (nvidia-smi not found")
    assert "docker run --gpus all" in text and "default-runtime" in text and "CDI" in text
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(not NO_GPU_HERE, reason="asserts the no-GPU refusal; this host has a GPU")
def test_preflight_refuses_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert stage_main(["preflight", "--tensorrt", "10.13", "--gpu"]) == 1
    assert capsys.readouterr().err == (
        "mmaas: error: no TensorRT in this stage (no tensorrt module, no trtexec)\n"
    )


def test_fake_gpu_same_engine_target_is_accepted() -> None:
    FakeGpuBackend(facts(A10)).check_compatible(manifest(facts(A10)))


@pytest.mark.parametrize(
    ("built", "here", "level", "says"),
    [
        (
            A10,
            T4,
            "none",
            "built for sm86 (NVIDIA A10) (hardware compatibility none), running on sm75 (Tesla T4)",
        ),
        (A10, L4, "same_compute_capability", "built for sm86 (NVIDIA A10)"),
        (L4, T4, "ampere+", "running on sm75 (Tesla T4)"),
    ],
)
def test_fake_gpu_other_compute_capability_is_refused(
    built: dict, here: dict, level: str, says: str
) -> None:
    with pytest.raises(CompatibilityError) as caught:
        FakeGpuBackend(facts(here)).check_compatible(manifest(facts(built), level))
    assert says in str(caught.value)


def test_fake_gpu_ampere_plus_engine_runs_on_a_newer_gpu() -> None:
    FakeGpuBackend(facts(L4)).check_compatible(manifest(facts(A10), "ampere+"))


def test_fake_gpu_other_tensorrt_is_refused_unless_version_compatible() -> None:
    built, newer = facts(A10, "10.13.2.6"), FakeGpuBackend(facts(A10, "10.14.1.48"))
    with pytest.raises(CompatibilityError) as caught:
        newer.check_compatible(manifest(built))
    assert str(caught.value).startswith(
        "built for TensorRT 10.13.2.6, running on TensorRT 10.14.1.48"
    )
    newer.check_compatible(manifest(built, vc=True))
    with pytest.raises(CompatibilityError):  # version compatibility is forward only
        FakeGpuBackend(facts(A10, "10.12.0.36")).check_compatible(manifest(built, vc=True))


def test_fake_gpu_old_driver_is_refused() -> None:
    """C12: a CUDA 13 engine on a 570 driver stays not-ready with driver vs required."""
    with pytest.raises(CompatibilityError) as caught:
        FakeGpuBackend(facts(A10, driver="570.86.10")).check_compatible(manifest(facts(A10)))
    assert str(caught.value) == (
        "built for CUDA 13.0.0 (driver >= 580.65.06), running on "
        "driver 570.86.10; upgrade the driver"
    )


def test_fake_gpu_missing_gpu_at_start_up() -> None:
    with pytest.raises(CompatibilityError) as caught:
        FakeGpuBackend(facts(None)).check_compatible(manifest(facts(A10)))
    assert str(caught.value) == (
        "built for sm86 (NVIDIA A10), running on no GPU: nvidia-smi not found"
    )
