"""Build-time gates on the real PP-OCR classifier: accuracy against ONNX Runtime on the
original ONNX model, latency against a p99 budget; in the stage and on its command line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from test_stage import CLS_INFO, run_stage_build

from mmaas.backends import CompileRequest
from mmaas.backends.onnxruntime.runtime import OnnxRuntimeRuntime
from mmaas.core.manifest import Manifest, read_manifest
from mmaas.core.request import AccuracyCheck, Checks, LatencyCheck, Tolerance
from mmaas.stage.accuracy import GateFailed, accuracy_gate, tolerance
from mmaas.stage.build import build_model_dir
from mmaas.stage.latency import latency_gate
from onnx_builder import ORT_SETTINGS

OUTPUT = "save_infer_model/scale_0.tmp_1"


def build_cls(source: Path, out: Path, **options: object) -> Manifest:
    """The builder stage on the PP-OCR classifier ``source`` into ``out``; ``options``
    (checks, samples) go to :func:`build_model_dir`."""
    return build_model_dir(
        CompileRequest(CLS_INFO, source, out, ORT_SETTINGS), "sha256:spec", out, **options
    )


@pytest.fixture(scope="module")
def cls_engine(ppocr_models: dict[str, Path], tmp_path_factory) -> tuple[Path, Manifest]:
    """The classifier compiled once (no gates) for this module's tests."""
    out = tmp_path_factory.mktemp("cls") / "model"
    return out, build_cls(ppocr_models["ppocr-cls"], out)


def perturbed_engine(model_dir: Path, tmp_path: Path, scale: float = 0.05):
    """A copy of the compiled engine whose float weights got relative noise of ``scale``
    (a broken lower-precision conversion, in effect), loaded in ONNX Runtime."""
    model = onnx.load(str(model_dir / "model.ort.onnx"))
    rng = np.random.default_rng(1)
    for index, tensor in enumerate(model.graph.initializer):
        weights = numpy_helper.to_array(tensor)
        if weights.dtype == np.float32 and weights.size > 16:
            noisy = weights * (1 + scale * rng.standard_normal(weights.shape)).astype(np.float32)
            model.graph.initializer[index].CopyFrom(numpy_helper.from_array(noisy, tensor.name))
    folder = tmp_path / "perturbed"
    folder.mkdir()
    onnx.save(model, str(folder / "model.ort.onnx"))
    return OnnxRuntimeRuntime().load(folder, read_manifest(model_dir))


def test_accuracy_gate_passes_at_fp32_and_its_report_is_in_the_manifest(
    ppocr_models: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "model"
    manifest = build_cls(
        ppocr_models["ppocr-cls"], out, checks=Checks(accuracy=AccuracyCheck(atol=1e-5))
    )
    report = manifest.report["accuracy"]
    assert report["passed"] and report["samples"] == ["random (seed 0) at the opt shapes"]
    stats = report["outputs"][OUTPUT]
    assert stats["max_abs_diff"] <= 1e-5 and stats["cosine"] > 0.999999
    assert report["reference"].startswith("onnxruntime ")
    assert json.loads((out / "report.json").read_text())["accuracy"] == report


def test_accuracy_gate_fails_on_a_perturbed_engine_naming_output_and_worst_element(
    cls_engine, ppocr_models: dict[str, Path], tmp_path: Path
) -> None:
    model_dir, _ = cls_engine
    engine = perturbed_engine(model_dir, tmp_path)
    with pytest.raises(GateFailed) as caught:
        accuracy_gate(
            engine, CLS_INFO, ppocr_models["ppocr-cls"], AccuracyCheck(atol=1e-4, rtol=1e-3), []
        )
    message = str(caught.value)
    assert f"accuracy gate failed for output {OUTPUT!r}" in message
    assert "worst element [" in message and "> allowed" in message
    stats = caught.value.report["outputs"][OUTPUT]
    assert not stats["passed"] and stats["max_abs_diff"] > 1e-3
    worst = stats["worst"]
    assert abs(worst["engine"] - worst["reference"]) > worst["allowed"]


def test_cosine_and_per_output_tolerances(cls_engine, ppocr_models, tmp_path: Path) -> None:
    model_dir, _ = cls_engine
    engine = perturbed_engine(model_dir, tmp_path, scale=0.01)
    source = ppocr_models["ppocr-cls"]
    loose = AccuracyCheck(atol=1e-6, outputs={OUTPUT: Tolerance(atol=1.0)})
    assert accuracy_gate(engine, CLS_INFO, source, loose, [])["passed"]
    with pytest.raises(GateFailed, match=r"cosine similarity 0\.\d+ \(min 0\.9999999\)"):
        accuracy_gate(engine, CLS_INFO, source, AccuracyCheck(min_cosine=0.9999999), [])
    assert tolerance(AccuracyCheck(), OUTPUT) == {"atol": 1e-4, "rtol": 1e-3, "min_cosine": None}
    assert tolerance(AccuracyCheck(min_cosine=0.9), OUTPUT) == {
        "atol": None,
        "rtol": None,
        "min_cosine": 0.9,
    }


def test_accuracy_gate_reads_sample_files(ppocr_models, tmp_path: Path) -> None:
    samples = tmp_path / "samples.npz"
    np.savez(samples, x=np.random.default_rng(3).random((2, 3, 48, 192), dtype=np.float32))
    out = tmp_path / "gated"
    built = build_cls(
        ppocr_models["ppocr-cls"], out, checks=Checks(accuracy=AccuracyCheck()), samples=[samples]
    )
    assert built.report["accuracy"]["samples"] == ["samples.npz"]
    assert built.report["accuracy"]["outputs"][OUTPUT]["passed"]


def test_latency_gate_fails_when_the_budget_is_below_the_measured_time(cls_engine) -> None:
    model_dir, manifest = cls_engine
    engine = OnnxRuntimeRuntime().load(model_dir, manifest)
    with pytest.raises(GateFailed) as caught:
        latency_gate(engine, CLS_INFO, LatencyCheck(p99_ms=0.001, runs=5, warmup=1))
    report = caught.value.report
    assert report["p99_ms"] > 0.001 and not report["passed"]
    assert str(caught.value).startswith(
        f"latency gate failed: p99 {report['p99_ms']:.3f} ms at x: 8x3x48x192 exceeds the "
        "budget 0.001 ms (p50 "
    )
    generous = latency_gate(engine, CLS_INFO, LatencyCheck(p99_ms=60000, runs=3, warmup=0, batch=2))
    assert generous["passed"] and generous["shapes"] == {"x": [2, 3, 48, 192]}
    assert generous["p50_ms"] <= generous["p99_ms"] <= generous["max_ms"]


def test_a_failed_gate_fails_the_stage_command_with_its_report(
    ppocr_models: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "model"
    done = run_stage_build(
        tmp_path / "engine-request.json",
        ppocr_models["ppocr-cls"],
        out,
        checks=Checks(latency=LatencyCheck(p99_ms=0.001, runs=3, warmup=0)),
    )
    assert done.returncode == 1
    assert "mmaas stage: error: latency gate failed: p99 " in done.stderr
    assert '"budget_p99_ms": 0.001' in done.stderr and "Traceback" not in done.stderr
    assert not out.exists()
