"""An ONNX model whose weights live in external data files (the format exporters use above
2 GiB): the ONNX Runtime engine carries its own data file, the manifest records and
verifies it, and the model directory serves on its own once the source is gone."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from mmaas.backends import CompileRequest, get_runtime
from mmaas.build.cache.local import EngineCache
from mmaas.core.errors import IntegrityError
from mmaas.core.manifest import FileRecord, read_manifest
from mmaas.core.model_dir import verify_engine_dir
from mmaas.core.model_request import EngineStamp, ModelRequest
from mmaas.stage.build import build_model_dir
from mmaas.stage.stamp import stamp_model_dir
from onnx_builder import EXTERNAL_INFO as INFO
from onnx_builder import ORT_SETTINGS, external_data_model

KEY = "sha256:" + "e" * 64


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, Path]:
    """(source ONNX file, model directory compiled from it by the stage)."""
    source = external_data_model(tmp_path / "source")
    out = tmp_path / "model"
    build_model_dir(
        CompileRequest(INFO, source, out, ORT_SETTINGS), "sha256:spec", out, engine_key=KEY
    )
    return source, out


def test_the_engine_carries_its_own_data_file_and_the_manifest_records_it(
    built: tuple[Path, Path],
) -> None:
    _, out = built
    manifest = read_manifest(out)
    assert manifest.engine.path == "model.ort.onnx"
    assert [data.path for data in manifest.engine_data] == ["model.ort.onnx.data"]
    assert manifest.engine_data[0] == FileRecord.of(out, "model.ort.onnx.data")
    assert manifest.engine_data[0].size_bytes >= 24 * 1024  # the weights, not the graph
    engine = onnx.load(str(out / "model.ort.onnx"), load_external_data=False)
    locations = {
        entry.value
        for tensor in engine.graph.initializer
        for entry in tensor.external_data
        if entry.key == "location"
    }
    assert locations == {"model.ort.onnx.data"}  # never the source's weights/big.bin
    assert not (out / "weights").exists()


def test_the_model_directory_serves_alone_like_onnxruntime_on_the_source(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    source, out = built
    x = np.random.default_rng(1).standard_normal((3, 64)).astype(np.float32)
    expected = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"]).run(
        ["y"], {"x": x}
    )[0]
    moved = tmp_path / "elsewhere" / "model"
    shutil.copytree(out, moved)
    shutil.rmtree(out)
    shutil.rmtree(source.parent)
    manifest = verify_engine_dir(moved)
    engine = get_runtime("onnxruntime").load(moved, manifest, threads=1)
    np.testing.assert_allclose(engine.infer({"x": x}, ["y"])["y"], expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("damage", ["edit", "truncate", "delete"])
def test_a_tampered_data_file_is_refused(built: tuple[Path, Path], damage: str) -> None:
    _, out = built
    data = out / "model.ort.onnx.data"
    if damage == "edit":
        blob = bytearray(data.read_bytes())
        blob[100] ^= 0xFF
        data.write_bytes(bytes(blob))
    elif damage == "truncate":
        data.write_bytes(data.read_bytes()[:-4])
    else:
        data.unlink()
    expected = (
        "engine data file is missing"
        if damage == "delete"
        else "engine data does not match its manifest"
    )
    with pytest.raises(IntegrityError, match=expected) as caught:
        verify_engine_dir(out)
    assert "model.ort.onnx.data" in str(caught.value)


def test_stage_verify_command_refuses_a_tampered_data_file(built: tuple[Path, Path]) -> None:
    _, out = built
    verify = [sys.executable, "-m", "mmaas.stage", "verify", str(out)]
    good = subprocess.run(verify, capture_output=True, text=True, check=False)
    assert good.returncode == 0 and "model.ort.onnx.data blake3:" in good.stdout
    with (out / "model.ort.onnx.data").open("ab") as stream:
        stream.write(b"\0")
    bad = subprocess.run(verify, capture_output=True, text=True, check=False)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert "model.ort.onnx.data: engine data does not match its manifest" in bad.stderr


def test_stamp_and_the_engine_cache_carry_and_check_the_data_file(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    _, out = built
    renamed = replace(INFO, name="renamed", version="2")
    engine = EngineStamp("model", ".", renamed, KEY)
    request = ModelRequest(renamed.name, renamed.version, "sha256:other", (engine,))
    stamped = stamp_model_dir(out, tmp_path / "stamped", request)
    assert stamped.engines[0].manifest.engine_data == read_manifest(out).engine_data
    cache = EngineCache(tmp_path / "cache")
    assert cache.store(KEY, out)
    hit = cache.checkout(KEY, tmp_path / "checkout")
    assert hit.hit and (tmp_path / "checkout" / "model.ort.onnx.data").is_file()
    entry = cache.entry_path(KEY) / "model.ort.onnx.data"
    entry.unlink()  # hard-linked: unlink, then write a damaged copy in its place
    entry.write_bytes(b"damaged")
    dropped = cache.checkout(KEY, tmp_path / "again")
    assert not dropped.hit and "engine data does not match" in dropped.note


def test_manifest_lists_engine_data_in_its_json(built: tuple[Path, Path]) -> None:
    _, out = built
    raw = json.loads((out / "manifest.json").read_text())
    assert raw["schema_version"] == 2
    assert [data["path"] for data in raw["engine_data"]] == ["model.ort.onnx.data"]
