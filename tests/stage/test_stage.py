"""The builder stage: compile, profile check over min/opt/max, hash, manifest."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from mmaas.backends import CompileRequest
from mmaas.core.errors import BuildError
from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.core.model_dir import verify_engine_dir, verify_model_dir
from mmaas.core.model_request import EngineStamp, ModelRequest
from mmaas.core.request import BuildRequest, Checks
from mmaas.stage.build import build_model_dir
from onnx_builder import ORT_SETTINGS
from server.graphs import ppocr_cls_info

CLS_INFO = ppocr_cls_info()  # the one description of the classifier the tests serve


def run_stage_build(
    request: Path, source: Path, out: Path, **fields: object
) -> subprocess.CompletedProcess[str]:
    """Write a build request for the classifier (``fields`` added, e.g. ``checks``) and run
    ``python -m mmaas.stage build`` on it, as the builder stage does."""
    body = BuildRequest(
        model=CLS_INFO,
        source=str(source),
        settings=asdict(ORT_SETTINGS),
        checks=Checks(),
        samples=(),
        spec_digest="sha256:spec",
        engine_key=None,
    )
    request.write_text(replace(body, **fields).to_json())
    argv = [sys.executable, "-m", "mmaas.stage", "build", str(request), str(out)]
    return subprocess.run(argv, capture_output=True, text=True, check=False)


def fixed_width_model(path: Path) -> Path:
    """x FP32 [N, W] declared dynamic, but an Add of a traced constant of width 16 only
    broadcasts at W = 16: an export that holds only at its traced size."""
    bias = helper.make_tensor("bias", TensorProto.FLOAT, [16], [0.0] * 16)
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "bias"], ["y"])],
        "traced",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "W"])],
        [bias],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_real_model_compiles_and_is_checked_at_every_profile_point(
    ppocr_models: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "model"
    source = ppocr_models["ppocr-cls"]
    manifest = build_model_dir(
        CompileRequest(CLS_INFO, source, out, ORT_SETTINGS), "sha256:spec", out
    )
    checks = manifest.report["profile_check"]
    assert [c["point"] for c in checks] == ["min", "opt", "max"]
    assert [c["outputs"]["save_infer_model/scale_0.tmp_1"] for c in checks] == [
        [1, 2],
        [8, 2],
        [32, 2],
    ]
    assert manifest.source.sha256 == (
        "sha256:e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c"
    )
    assert manifest.backend["name"] == "onnxruntime" and manifest.backend["cpu"]["arch"]
    assert sorted(p.name for p in out.iterdir()) == [
        "manifest.json",
        "model.ort.onnx",
        "model.ort.onnx.data",  # the weights, beside the graph (ONNX external data)
        "report.json",
    ]
    assert [data.path for data in manifest.engine_data] == ["model.ort.onnx.data"]
    assert out.stat().st_mode & 0o755 == 0o755
    assert verify_engine_dir(out) == manifest


def test_profile_check_fails_the_build_naming_the_point_and_shapes(tmp_path: Path) -> None:
    source = fixed_width_model(tmp_path / "traced.onnx")
    info = ModelInfo(
        name="traced",
        version="1",
        backend="onnxruntime",
        precision="fp32",
        max_batch_size=2,
        inputs=(TensorInfo("x", "FP32", (-1, -1), (1, 16), (1, 16), (2, 32)),),
        outputs=(TensorInfo("y", "FP32", (-1, -1)),),
    )
    out = tmp_path / "model"
    with pytest.raises(BuildError, match=r"profile check failed at the max shapes \(x: 2x32\)"):
        build_model_dir(CompileRequest(info, source, out, ORT_SETTINGS), "sha256:spec", out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["traced.onnx"]  # nothing half-written


def test_stage_command_line_builds_and_verifies(
    ppocr_models: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "model"
    built = run_stage_build(tmp_path / "build-request.json", ppocr_models["ppocr-cls"], out)
    assert built.returncode == 0, built.stderr
    assert json.loads(built.stdout)["engine"]["path"] == "model.ort.onnx"
    (out / "model.ort.onnx").write_bytes(b"tampered")
    checked = subprocess.run(
        [sys.executable, "-m", "mmaas.stage", "verify", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 1
    assert "does not match its manifest" in checked.stderr
    assert "Traceback" not in checked.stderr


def one_engine(model: ModelInfo, spec_digest: str, key: str | None) -> ModelRequest:
    """The stamp request of a single-engine model served as ``model``."""
    engine = EngineStamp("model", ".", model, key)
    return ModelRequest(model.name, model.version, spec_digest, (engine,))


def test_stamp_reseals_one_engine_for_another_name_and_version(
    ppocr_models: dict[str, Path], tmp_path: Path
) -> None:
    """What the package build does with a compiled or cached engine directory."""
    from dataclasses import replace

    from mmaas.core.errors import IntegrityError
    from mmaas.core.manifest import read_manifest
    from mmaas.stage.stamp import stamp_model_dir

    key = "sha256:" + "a" * 64
    engine = tmp_path / "engine"
    source = ppocr_models["ppocr-cls"]
    build_model_dir(
        CompileRequest(CLS_INFO, source, engine, ORT_SETTINGS), "sha256:e", engine, engine_key=key
    )
    renamed = replace(CLS_INFO, name="cls-renamed", version="2.0.0")
    out = tmp_path / "model"
    model = stamp_model_dir(engine, out, one_engine(renamed, "sha256:spec", key))
    (entry,) = model.engines
    manifest = entry.manifest
    assert (model.name, model.version, model.spec_digest) == ("cls-renamed", "2.0.0", "sha256:spec")
    assert (entry.name, entry.directory, model.schema_version) == ("model", ".", 3)
    assert manifest.model == renamed and manifest.spec_digest == "sha256:spec"
    assert manifest.engine == read_manifest(engine).engine
    assert manifest.build["engine_key"] == key and verify_model_dir(out) == model
    assert (out / "report.json").read_text() == (engine / "report.json").read_text()
    with pytest.raises(IntegrityError, match=r"built for key sha256:a+, this build needs"):
        stamp_model_dir(engine, tmp_path / "other", one_engine(renamed, "s", "sha256:" + "b" * 64))
    with pytest.raises(IntegrityError, match="serves another signature"):
        stamp_model_dir(
            engine, tmp_path / "other", one_engine(replace(renamed, max_batch_size=8), "s", key)
        )
    assert not (tmp_path / "other").exists()
