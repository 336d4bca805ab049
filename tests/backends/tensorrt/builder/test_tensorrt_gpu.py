"""TensorRT for real, on a GPU host: build the ppocr-det engine at fp16 with trtexec,
rebuild proving the timing cache was reused, serve it over KServe v2 gRPC and compare with
ONNX Runtime within the spec's tolerance. Skipped (with the reason) where nvidia-smi or
trtexec is missing, as on the project's CPU machines."""

from __future__ import annotations

import shutil
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as triton

from mmaas.backends.tensorrt.builder import TensorRTCompiler
from mmaas.backends.tensorrt.runtime import TRTEXEC_PATHS, TensorRTRuntime, tensorrt_version
from mmaas.build.plan import compile_request
from mmaas.build.spec_checks import host_checks
from mmaas.core.manifest import Manifest
from mmaas.spec.load import parse_spec
from mmaas.stage.build import build_model_dir
from paths import ROOT

DET = ROOT / "models" / "ppocr-det" / "model.yaml"
HAS_TRTEXEC = shutil.which("trtexec") or any(Path(p).is_file() for p in TRTEXEC_PATHS)
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no nvidia-smi: no GPU here"),
    pytest.mark.skipif(not HAS_TRTEXEC, reason="no trtexec on this host (TensorRT not installed)"),
]


def det_spec(verify_cache: bool):
    release = ".".join((tensorrt_version() or "0.0").split(".")[:2])
    text = DET.read_text().replace("backend: onnxruntime", "backend: tensorrt")
    text = text.replace("target_precision: fp32", "target_precision: fp16")
    text += (
        f'build:\n  tensorrt:\n    version: "{release}"\n'
        f"    timing_cache_verify: {str(verify_cache).lower()}\n"
    )
    return parse_spec(text, DET, checks=host_checks())


def build(tmp_path: Path, name: str, verify_cache: bool) -> tuple[Manifest, object]:
    loaded = det_spec(verify_cache)
    request = compile_request(loaded.spec, loaded.source_path, tmp_path / name)
    request = replace(request, cache_dir=tmp_path / "timing-caches")
    return build_model_dir(request, loaded.spec.digest(), tmp_path / name), loaded


def test_build_fp16_reuse_cache_serve_and_match_onnxruntime(tmp_path: Path) -> None:
    manifest, loaded = build(tmp_path, "first", verify_cache=False)
    compiled = manifest.report["compile"]
    assert compiled["trtexec"]["outcome"] == "passed"
    assert compiled["trtexec"]["workspace_mib"] == pytest.approx(2048, abs=0.5)
    assert compiled["timing_cache"]["stored_bytes"] > 0
    assert manifest.backend["gpu"]["compute_capability"]
    TensorRTRuntime().check_compatible(manifest)

    again, _ = build(tmp_path, "second", verify_cache=True)  # --errorOnTimingCacheMiss
    assert again.report["compile"]["timing_cache"]["reused"]
    assert again.report["compile"]["trtexec"]["timing_cache"]["loaded_bytes"] > 0

    sys.path.insert(0, str(ROOT / "tests"))
    from server.conftest import launch  # the server fixtures' launcher

    server = launch(tmp_path / "first", tmp_path / "server.log")
    try:
        server.wait_serving()
        x = np.random.default_rng(0).random((1, 3, 640, 640), dtype=np.float32)
        request = triton.InferInput("x", list(x.shape), "FP32")
        request.set_data_from_numpy(x)
        got = server.client().infer("ppocr-det", [request]).as_numpy("sigmoid_0.tmp_0")
        want = ort.InferenceSession(str(loaded.source_path)).run(None, {"x": x})[0]
        trt = loaded.spec.build.tensorrt
        assert np.allclose(got, want, atol=trt.tolerance_atol, rtol=trt.tolerance_rtol), (
            f"max abs diff {np.abs(got - want).max()}"
        )
        outside = triton.InferInput("x", [1, 3, 2048, 2048], "FP32")
        outside.set_data_from_numpy(np.zeros((1, 3, 2048, 2048), np.float32))
        with pytest.raises(triton.InferenceServerException, match="optimization profile"):
            server.client().infer("ppocr-det", [outside])
    finally:
        server.stop()


def test_latency_gate_timer_runs_trtexec_load_engine(tmp_path: Path) -> None:
    manifest, _ = build(tmp_path, "timed", verify_cache=False)
    probe = TensorRTCompiler().latency_probe(tmp_path / "timed", manifest)
    figures = probe({"x": (1, 3, 640, 640)}, 20, 2)
    assert 0 < figures["p50_ms"] <= figures["p90_ms"] <= figures["p99_ms"] <= figures["max_ms"]
    assert (tmp_path / "timed" / "trtexec" / "trtexec-latency.log").is_file()


def builder_image_present() -> bool:
    from mmaas.build import docker as docker_engine
    from mmaas.core.errors import MmaasError

    try:
        docker_engine.inspect_image(det_spec(False).spec.build.tensorrt.builder_image)
    except MmaasError:
        return False
    return True


@pytest.mark.docker
def test_mmaas_build_takes_the_gpu_route_and_labels_the_image(tmp_path: Path) -> None:
    if not builder_image_present():
        pytest.skip("the TensorRT builder image is not in the local Docker engine")
    import json

    from mmaas.build import docker as docker_engine
    from mmaas.core import proc

    loaded = det_spec(False)
    text = DET.read_text().replace("backend: onnxruntime", "backend: tensorrt")
    text = text.replace("target_precision: fp32", "target_precision: fp16")
    text = text.replace(f"path: {loaded.source_path.name}", f"path: {loaded.source_path}")
    release = loaded.spec.build.tensorrt.version
    (tmp_path / "det").mkdir()
    (tmp_path / "det" / "model.yaml").write_text(
        text + f'build:\n  tensorrt:\n    version: "{release}"\n'
    )
    mmaas = str(Path(sys.executable).with_name("mmaas"))
    done = proc.run([mmaas, "build", str(tmp_path / "det"), "--json"], check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    image = json.loads(done.stdout)["image"]
    try:
        labels = docker_engine.image_labels(image)
        assert labels["io.mmaas.backend"] == "tensorrt"
        assert labels["io.mmaas.tensorrt.version"].startswith(release)
        assert labels["io.mmaas.driver.min"] and labels["io.mmaas.gpu.compute_capability"]
    finally:
        docker_engine.run(["image", "rm", "--force", image])
