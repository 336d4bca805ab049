"""The manifest: atomic write, self-digest, engine re-hash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmaas.core.errors import IntegrityError
from mmaas.core.manifest import (
    FileRecord,
    Manifest,
    ModelInfo,
    TensorInfo,
    read_manifest,
    verify_engine,
    write_manifest,
)


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    (tmp_path / "model.ort.onnx").write_bytes(b"engine bytes")
    (tmp_path / "source.onnx").write_bytes(b"source bytes")
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "engine.data").write_bytes(b"engine weights")
    info = ModelInfo(
        name="m",
        version="1",
        backend="onnxruntime",
        precision="fp32",
        max_batch_size=2,
        inputs=(TensorInfo("in:0", "FP32", (-1, 3), (1, 3), (1, 3), (2, 3)),),
        outputs=(TensorInfo("out/0", "FP32", (-1, 2)),),
    )
    manifest = Manifest(
        model=info,
        engine=FileRecord.of(tmp_path, "model.ort.onnx"),
        engine_data=(FileRecord.of(tmp_path, "weights/engine.data"),),
        source=FileRecord.of(tmp_path, "source.onnx"),
        spec_digest="sha256:0",
        backend={"name": "onnxruntime", "version": "1"},
        build={},
    )
    write_manifest(tmp_path, manifest)
    return tmp_path


def test_round_trip_keeps_every_field(model_dir: Path) -> None:
    manifest = read_manifest(model_dir)
    assert manifest.model.inputs[0] == TensorInfo("in:0", "FP32", (-1, 3), (1, 3), (1, 3), (2, 3))
    assert manifest.model.outputs[0].name == "out/0"
    assert manifest.engine.blake3.startswith("blake3:") and manifest.engine.size_bytes == 12
    assert manifest.engine_data == (FileRecord.of(model_dir, "weights/engine.data"),)
    assert manifest.manifest_digest.startswith("sha256:")
    assert verify_engine(model_dir, manifest).blake3 == manifest.engine.blake3
    assert not [p.name for p in model_dir.iterdir() if p.name.endswith(".tmp")]


def test_an_edited_manifest_is_refused(model_dir: Path) -> None:
    path = model_dir / "manifest.json"
    raw = json.loads(path.read_text())
    raw["model"]["max_batch_size"] = 64
    path.write_text(json.dumps(raw))
    with pytest.raises(IntegrityError, match="altered after the build"):
        read_manifest(model_dir)


def test_an_edited_engine_is_refused(model_dir: Path) -> None:
    manifest = read_manifest(model_dir)
    with (model_dir / "model.ort.onnx").open("ab") as stream:
        stream.write(b"!")
    with pytest.raises(IntegrityError, match="does not match its manifest"):
        verify_engine(model_dir, manifest)


def test_a_missing_engine_or_manifest_is_named(model_dir: Path, tmp_path: Path) -> None:
    manifest = read_manifest(model_dir)
    (model_dir / "model.ort.onnx").unlink()
    with pytest.raises(IntegrityError, match="engine file is missing"):
        verify_engine(model_dir, manifest)
    with pytest.raises(IntegrityError, match="no manifest"):
        read_manifest(tmp_path / "elsewhere")


def test_another_schema_version_says_rebuild(model_dir: Path) -> None:
    path = model_dir / "manifest.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "schema_version": 99}))
    with pytest.raises(IntegrityError, match=r"schema_version 99.*rebuild"):
        read_manifest(model_dir)


def test_an_edited_or_missing_engine_data_file_is_refused_by_name(model_dir: Path) -> None:
    manifest = read_manifest(model_dir)
    data = model_dir / "weights" / "engine.data"
    data.write_bytes(b"engine weightz")  # same size, other bytes
    with pytest.raises(
        IntegrityError,
        match=r"weights/engine.data: engine data does not "
        r"match its manifest: built blake3:\w+ \(14 bytes\), found blake3:",
    ):
        verify_engine(model_dir, manifest)
    data.unlink()
    with pytest.raises(IntegrityError, match=r"weights/engine.data: engine data file is missing"):
        verify_engine(model_dir, manifest)


def test_a_schema_1_manifest_without_engine_data_says_rebuild(model_dir: Path) -> None:
    path = model_dir / "manifest.json"
    raw = json.loads(path.read_text())
    del raw["engine_data"]
    path.write_text(json.dumps({**raw, "schema_version": 1}))
    said = r"schema_version 1, this mmaas reads 2 \(an engine directory\); rebuild"
    with pytest.raises(IntegrityError, match=said):
        read_manifest(model_dir)
