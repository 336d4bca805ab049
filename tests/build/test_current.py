"""Build records without Docker: where they live, that one is written whole
and replaced whole, and that a missing or damaged record never makes an image current. The
Docker side (an unchanged rebuild runs no build, a retagged image is rebuilt) is tested in
tests/build/cache/test_build_reuse.py."""

from __future__ import annotations

import json
from pathlib import Path

from tests.build.cache.test_engine_cache import tiny_model

from mmaas.build.current import (
    BUILD_DIGEST_LABEL,
    RECORD_FILE,
    CurrentImage,
    current_image,
    labelled,
    record_build,
    records_root,
)
from mmaas.build.plan import compile_request
from mmaas.core.manifest import MANIFEST_NAME, read_manifest
from mmaas.stage.build import build_model_dir

DIGEST = "sha256:" + "ab" * 32


def model_dir(tmp_path: Path) -> Path:
    """A compiled, verified model directory of the tiny model."""
    loaded = tiny_model(tmp_path / "model")
    out = tmp_path / "engine"
    request = compile_request(loaded.spec, loaded.source_path, out)
    build_model_dir(request, "sha256:spec", out)
    return out


def test_records_live_in_the_engine_cache(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MMAAS_CACHE_DIR", str(tmp_path / "home"))
    assert records_root(None) == tmp_path / "home" / "engines" / "builds"
    assert records_root(tmp_path / "mine") == tmp_path / "mine" / "builds"


def test_no_record_means_a_build_and_says_nothing(tmp_path: Path) -> None:
    assert current_image("mmaas-test/none:1", DIGEST, tmp_path / "builds") == (None, "")


def test_a_record_is_written_whole_and_replaced_whole(tmp_path: Path) -> None:
    built = model_dir(tmp_path)
    manifest = read_manifest(built)
    labels = labelled({"io.mmaas.engine.blake3": manifest.engine.blake3}, DIGEST)
    assert labels[BUILD_DIGEST_LABEL] == DIGEST and labelled(labels, None) == labels
    records = tmp_path / "builds"
    for image_id in ("sha256:" + "1" * 64, "sha256:" + "2" * 64):
        done = CurrentImage("mmaas-test/tiny:1", image_id, labels, "sha256:plan", manifest)
        record_build(records, DIGEST, done, built)
    record = records / DIGEST.removeprefix("sha256:")
    assert sorted(p.name for p in record.iterdir()) == [RECORD_FILE, MANIFEST_NAME]
    saved = json.loads((record / RECORD_FILE).read_text())
    assert saved["image_id"] == "sha256:" + "2" * 64 and saved["labels"] == labels
    assert read_manifest(record) == manifest
    assert [p.name for p in records.iterdir() if not p.name.endswith(".lock")] == [record.name]


def test_a_damaged_record_is_reported_and_never_current(tmp_path: Path) -> None:
    built = model_dir(tmp_path)
    manifest = read_manifest(built)
    records = tmp_path / "builds"
    done = CurrentImage("mmaas-test/tiny:1", "sha256:" + "1" * 64, {}, "sha256:plan", manifest)
    record_build(records, DIGEST, done, built)
    record = records / DIGEST.removeprefix("sha256:")
    (record / MANIFEST_NAME).write_text((record / MANIFEST_NAME).read_text().replace("1", "2"))
    found, why = current_image("mmaas-test/tiny:1", DIGEST, records)
    assert found is None
    assert why.startswith(f"the record of build {DIGEST[:19]} is unreadable (")
    assert why.endswith("): building")
    (record / RECORD_FILE).write_text("{not json")
    found, why = current_image("mmaas-test/tiny:1", DIGEST, records)
    assert found is None and "is unreadable" in why
