"""The engine cache: what changes the key and what does not, verified entries, corrupt
entries dropped, and concurrent builds sharing one cache directory."""

from __future__ import annotations

import json
import multiprocessing
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

from mmaas.build.cache.key import (
    backend_pin,
    engine_key,
    engine_spec,
    hardware_class,
    image_content,
)
from mmaas.build.cache.local import EngineCache, verify_entry
from mmaas.build.context import TOOLKIT_DIR
from mmaas.build.plan import compile_request, engine_inputs
from mmaas.build.spec_checks import host_checks
from mmaas.core.errors import IntegrityError
from mmaas.spec.load import LoadedSpec, load_spec
from mmaas.stage.build import build_model_dir
from onnx_builder import IMAGE_MODEL, make_onnx

SPEC = """name: tiny
version: "1.0.0"
description: a tiny model
source: {path: model.onnx}
max_batch_size: 4
inputs:
  - name: x
    min: [1, 3, 8, 8]
    opt: [2, 3, 8, 8]
    max: [4, 3, 16, 16]
build: {workspace: 2048, onnxruntime: {graph_optimization_level: all}}
checks:
  accuracy: {atol: 0.001, samples: [samples/a.npz]}
runtime: {grpc_port: 8001}
image: {labels: {team: ocr}}
"""
IMAGE_ID = "sha256:" + "1" * 64


def tiny_model(folder: Path, spec: str = SPEC) -> LoadedSpec:
    """A model folder: an Identity model, its model.yaml, a sample file and a README."""
    (folder / "samples").mkdir(parents=True, exist_ok=True)
    if not (folder / "model.onnx").exists():
        make_onnx(folder / "model.onnx", IMAGE_MODEL)
    np.savez(folder / "samples" / "a.npz", x=np.ones((1, 3, 8, 8), np.float32))
    (folder / "README.md").write_text("# tiny\n")
    (folder / "model.yaml").write_text(spec)
    return load_spec(folder, checks=host_checks())


def key_of(
    loaded: LoadedSpec,
    *,
    toolkit: Path = TOOLKIT_DIR,
    image: str = IMAGE_ID,
    backend: dict[str, str] | None = None,
    hardware: dict | None = None,
) -> str:
    spec = loaded.spec
    files = engine_inputs(spec, loaded.source_path, toolkit_dir=toolkit, model_dir=loaded.model_dir)
    return engine_key(
        engine_spec(spec, loaded.source_path),
        files,
        backend or backend_pin(spec),
        image,
        hardware or hardware_class(spec),
    )


SAME_KEY = {
    "name": ("name: tiny", "name: renamed"),
    "version": ('version: "1.0.0"', 'version: "1.0.1"'),
    "description": ("a tiny model", "another description"),
    "runtime settings": ("grpc_port: 8001", "grpc_port: 9001, instance_count: 3"),
    "image labels and tag": ("team: ocr}", 'team: vision}, tag: "abc1234"'),
    "TensorRT-only build settings": ("workspace: 2048", "workspace: 4096, timing_cache: false"),
}
NEW_KEY = {
    "optimization profile": ("max: [4, 3, 16, 16]", "max: [4, 3, 32, 32]"),
    "graph optimization level": ("level: all", "level: basic"),
    "accuracy tolerance": ("atol: 0.001", "atol: 0.01"),
    "latency gate": ("\nruntime:", "\n  latency: {p99_ms: 50}\nruntime:"),
}


@pytest.mark.parametrize("change", sorted(SAME_KEY))
def test_changes_outside_the_engine_keep_the_key(change: str, tmp_path: Path) -> None:
    base = key_of(tiny_model(tmp_path))
    old, new = SAME_KEY[change]
    assert key_of(tiny_model(tmp_path, SPEC.replace(old, new))) == base


@pytest.mark.parametrize("change", sorted(NEW_KEY))
def test_changes_to_the_engine_inputs_change_the_key(change: str, tmp_path: Path) -> None:
    base = key_of(tiny_model(tmp_path))
    old, new = NEW_KEY[change]
    assert old in SPEC
    assert key_of(tiny_model(tmp_path, SPEC.replace(old, new))) != base


def test_files_back_end_image_and_hardware_are_in_the_key(tmp_path: Path) -> None:
    loaded = tiny_model(tmp_path / "m")
    base = key_of(loaded)
    (tmp_path / "m" / "README.md").write_text("# a README change is not an engine input\n")
    assert key_of(loaded) == base
    assert key_of(loaded, image="sha256:" + "2" * 64) != base
    assert key_of(loaded, backend={"name": "onnxruntime", "version": "0.0.1"}) != base
    flags = hardware_class(loaded.spec)
    assert key_of(loaded, hardware={**flags, "cpu_flags": ["sse4_1"]}) != base
    np.savez(tmp_path / "m" / "samples" / "a.npz", x=np.zeros((1, 3, 8, 8), np.float32))
    assert key_of(loaded) != base
    model = onnx.load(str(loaded.source_path))
    onnx.helper.set_model_props(model, {"exported_by": "another run"})
    onnx.save(model, str(loaded.source_path))
    assert key_of(loaded) != key_of(tiny_model(tmp_path / "other"))
    toolkit = shutil.copytree(TOOLKIT_DIR, tmp_path / "toolkit")
    assert key_of(loaded, toolkit=toolkit) == key_of(loaded)
    stage = toolkit / "stage" / "build.py"
    stage.write_text(stage.read_text() + "\n# changed\n")
    assert key_of(loaded, toolkit=toolkit) != key_of(loaded)
    stage.write_text(stage.read_text().replace("\n# changed\n", ""))
    server = toolkit / "server" / "app.py"  # the builder stage never runs the server (C13)
    server.write_text(server.read_text() + "\n# changed\n")
    assert key_of(loaded, toolkit=toolkit) == key_of(loaded)
    (toolkit / "stage" / "build.py").write_text("# changed\n")
    assert key_of(loaded, toolkit=toolkit) != key_of(loaded)


def test_builder_image_content_ignores_labels_but_not_layers_or_env() -> None:
    inspected = {
        "Id": "sha256:" + "1" * 64,
        "RootFS": {"Layers": ["sha256:" + "a" * 64]},
        "Config": {"Env": ["PATH=/usr/bin"], "Labels": {"a": "1"}},
        "Os": "linux",
        "Architecture": "amd64",
    }
    base = image_content(inspected)
    relabelled = {
        **inspected,
        "Id": "sha256:" + "2" * 64,
        "Config": {"Env": ["PATH=/usr/bin"], "Labels": {"a": "2"}},
    }
    assert image_content(relabelled) == base
    assert image_content({**inspected, "RootFS": {"Layers": ["sha256:" + "b" * 64]}}) != base
    assert image_content({**inspected, "Config": {"Env": ["PATH=/opt/bin"]}}) != base


def test_hardware_class_holds_cpu_flags_only_where_the_engine_depends_on_them(
    tmp_path: Path,
) -> None:
    at_all = hardware_class(tiny_model(tmp_path).spec)
    assert set(at_all) == {"arch", "cpu_flags"}
    basic = hardware_class(tiny_model(tmp_path, SPEC.replace("level: all", "level: basic")).spec)
    assert basic == {"arch": at_all["arch"]}
    assert backend_pin(tiny_model(tmp_path).spec)["name"] == "onnxruntime"
    assert backend_pin(tiny_model(tmp_path).spec)["version"][0].isdigit()


@pytest.fixture
def entry(tmp_path: Path) -> tuple[str, Path]:
    """A compiled engine directory of the tiny model recorded under a key."""
    loaded = tiny_model(tmp_path / "model")
    key = key_of(loaded)
    out = tmp_path / "engine"
    build_model_dir(
        compile_request(loaded.spec, loaded.source_path, out), "sha256:spec", out, engine_key=key
    )
    return key, out


def test_store_then_checkout_verifies_a_whole_entry(entry, tmp_path: Path) -> None:
    key, engine = entry
    cache = EngineCache(tmp_path / "cache")
    assert not cache.checkout(key, tmp_path / "miss").hit
    assert cache.store(key, engine) is True
    assert cache.store(key, engine) is False  # an intact entry is kept
    found = cache.checkout(key, tmp_path / "hit")
    assert found.hit and found.note == f"engine cache hit {key}"
    assert verify_entry(found.path, key).engine == verify_entry(engine, key).engine
    assert sorted(p.name for p in found.path.iterdir()) == [
        "manifest.json",
        "model.ort.onnx",
        "report.json",
    ]


def test_cache_root_follows_mmaas_cache_dir(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MMAAS_CACHE_DIR", str(tmp_path))
    assert EngineCache().root == tmp_path / "engines"


@pytest.mark.parametrize("damage", ["engine bytes", "manifest", "report", "foreign key"])
def test_a_corrupt_entry_is_dropped_reported_and_never_served(
    entry, damage: str, tmp_path: Path
) -> None:
    key, engine = entry
    cache = EngineCache(tmp_path / "cache")
    cache.store(key, engine)
    stored = cache.entry_path(key)
    if damage == "engine bytes":  # in place, as a disk fault would (not through the link)
        data = bytearray((stored / "model.ort.onnx").read_bytes())
        data[-1] ^= 0xFF
        (stored / "model.ort.onnx").unlink()
        (stored / "model.ort.onnx").write_bytes(bytes(data))
    elif damage == "manifest":
        manifest = json.loads((stored / "manifest.json").read_text())
        manifest["model"]["max_batch_size"] = 64
        (stored / "manifest.json").unlink()
        (stored / "manifest.json").write_text(json.dumps(manifest))
    elif damage == "report":
        (stored / "report.json").unlink()
        (stored / "report.json").write_text("{}\n")
    else:
        other = "sha256:" + "f" * 64
        stored.rename(cache.entry_path(other))
        key = other
    found = cache.checkout(key, tmp_path / "out")
    assert not found.hit
    assert found.note.startswith(f"engine cache entry {key} dropped (corrupt: ")
    assert not cache.entry_path(key).exists() and not (tmp_path / "out").exists()
    if damage == "foreign key":  # the engine of one key is never stored under another
        with pytest.raises(IntegrityError, match="was built for key"):
            cache.store(key, engine)
    else:  # the rebuilt engine takes the dropped entry's place
        assert cache.store(key, engine) and cache.checkout(key, tmp_path / "again").hit


def _build_like_a_pipeline(root: str, key: str, engine: str, rounds: int) -> list[str]:
    cache, notes = EngineCache(Path(root)), []
    for index in range(rounds):
        dest = Path(root).parent / f"dest-{multiprocessing.current_process().pid}-{index}"
        found = cache.checkout(key, dest)
        notes.append(found.note)
        if found.hit:
            verify_entry(found.path, key)
            shutil.rmtree(dest)
        else:
            notes.append(f"stored={cache.store(key, Path(engine))}")
    return notes


def test_concurrent_builds_share_one_cache_without_torn_entries(entry, tmp_path: Path) -> None:
    key, engine = entry
    root = tmp_path / "cache" / "engines"
    with multiprocessing.get_context("fork").Pool(4) as pool:
        results = pool.starmap(
            _build_like_a_pipeline, [(str(root), key, str(engine), 8) for _ in range(4)]
        )
    notes = [note for result in results for note in result]
    assert not [note for note in notes if "dropped" in note]
    assert notes.count("stored=True") == 1
    assert notes.count(f"engine cache hit {key}") >= 4 * 8 - 4
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == [
        key.partition(":")[2]
    ]
    assert not list(root.glob(".incoming-*"))
    verify_entry(root / key.partition(":")[2], key)
