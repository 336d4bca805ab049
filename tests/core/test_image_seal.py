"""Sealing a model directory (mmaas.core.image_seal): the manifest records the listing and
is sealed anew (so a signature over its digest covers every listed file); the start-up
check refuses a changed file, and with trusted keys an unsealed directory, another model
directory, an interpreter path or a library preload the listing does not cover; the
launch check refuses an image that starts anything but the isolated server."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from mmaas.core.errors import IntegrityError
from mmaas.core.file_listing import LISTING_NAME, RECORDED
from mmaas.core.image_seal import (
    ENTRYPOINT,
    check_image,
    check_interpreter,
    check_launch,
    main,
    read_listing,
    seal,
)
from mmaas.core.manifest import FileRecord, Manifest, ModelInfo, TensorInfo, write_manifest
from mmaas.core.model_manifest import read_model_manifest


@pytest.fixture
def image(tmp_path: Path) -> Path:
    """``opt/`` holding a one-engine model directory (``opt/model``) and a ``venv/``."""
    model = tmp_path / "opt" / "model"
    model.mkdir(parents=True)
    (model / "model.ort.onnx").write_bytes(b"engine bytes")
    (model / "report.json").write_text("{}")
    (tmp_path / "opt" / "venv").mkdir()
    (tmp_path / "opt" / "venv" / "app.py").write_text("print('served')\n")
    info = ModelInfo("m", "1", "onnxruntime", "fp32", 0, (TensorInfo("x", "FP32", (2,)),), ())
    record = FileRecord.of(model, "model.ort.onnx")
    write_manifest(model, Manifest(info, record, record, "sha256:0", {}, {}))
    return tmp_path


def sealed(image: Path) -> Path:
    model = image / "opt" / "model"
    seal(model, [str(image / "opt")], path=[])
    return model


def test_seal_records_the_listing_in_a_resealed_manifest(image: Path) -> None:
    model = image / "opt" / "model"
    before = read_model_manifest(model).manifest_digest
    manifest, listing = seal(model, [str(image / "opt")], path=[])
    assert manifest.image_files is not None and manifest.image_files.path == LISTING_NAME
    assert read_model_manifest(model) == manifest and manifest.manifest_digest != before
    assert read_listing(model, manifest) == listing
    assert listing.files[str(model / "model.ort.onnx")] == RECORDED
    assert str(image / "opt" / "venv" / "app.py") in listing.files
    assert "image files verified: 3 files" in check_image(model, manifest, trusted=False)


def test_the_start_check_refuses_a_changed_file(image: Path) -> None:
    model = sealed(image)
    (image / "opt" / "venv" / "app.py").write_text("print('patched')\n")
    with pytest.raises(IntegrityError, match=r"venv/app.py: a file of blake3:\w+\.\.\., signed"):
        check_image(model, read_model_manifest(model), trusted=False)


def test_an_edited_listing_is_refused_by_its_record(image: Path) -> None:
    model = sealed(image)
    listing = model / LISTING_NAME
    listing.write_text(listing.read_text().replace("app.py", "app2.py"))
    with pytest.raises(IntegrityError, match="image file listing does not match its manifest"):
        check_image(model, read_model_manifest(model), trusted=False)


def test_trusted_keys_need_a_sealed_directory_and_the_sealed_one(image: Path) -> None:
    model = image / "opt" / "model"
    unsealed = read_model_manifest(model)
    assert check_image(model, unsealed, trusted=False) is None
    with pytest.raises(IntegrityError, match="covers the engines but not the code"):
        check_image(model, unsealed, trusted=True)
    sealed(image)
    copy = shutil.copytree(model, image / "elsewhere")  # a model directory mounted elsewhere
    with pytest.raises(IntegrityError, match=r"MMAAS_MODEL_DIR is .*elsewhere, but the signed"):
        check_image(copy, read_model_manifest(copy), trusted=True)


def test_the_interpreter_may_run_only_listed_code(image: Path) -> None:
    listing = read_listing(sealed(image), read_model_manifest(image / "opt" / "model"))
    assert listing is not None
    check_interpreter(listing, [str(image / "opt" / "venv")], {})
    with pytest.raises(IntegrityError, match=r"sys.path holds '/srv/evil'.*python -I -B -u"):
        check_interpreter(listing, [str(image / "opt" / "venv"), "/srv/evil"], {})
    with pytest.raises(IntegrityError, match="working directory"):
        check_interpreter(listing, [""], {})
    with pytest.raises(IntegrityError, match=r"LD_PRELOAD='/tmp/x\.so' loads a library"):
        check_interpreter(listing, [], {"LD_PRELOAD": "/tmp/x.so"})
    with pytest.raises(IntegrityError, match="LD_LIBRARY_PATH names '/usr/evil'"):
        check_interpreter(listing, [], {"LD_LIBRARY_PATH": f"{image}/opt/venv:/usr/evil"})


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ({"Entrypoint": ["sh", "-c", "evil; python -I -m mmaas.server"]}, "starts ['sh', '-c'"),
        ({"Entrypoint": ["python", "-m", "mmaas.server"]}, "not the server as mmaas builds it"),
        ({"Entrypoint": list(ENTRYPOINT), "Cmd": ["--debug"]}, "with command ['--debug']"),
        ({"Entrypoint": list(ENTRYPOINT), "Env": ["LD_PRELOAD=/x.so"]}, "its environment"),
    ],
)
def test_an_image_must_start_the_isolated_server(image: Path, config, fragment: str) -> None:
    listing = read_listing(sealed(image), read_model_manifest(image / "opt" / "model"))
    assert listing is not None
    check_launch("img", {"Entrypoint": list(ENTRYPOINT), "Env": ["PATH=/bin"]}, listing)
    with pytest.raises(IntegrityError) as info:
        check_launch("img", config, listing)
    assert fragment in info.value.message


def test_the_seal_command_lists_the_interpreter_it_runs_in(image: Path, monkeypatch) -> None:
    """``python -I -B -m mmaas.core.image_seal MODEL_DIR ROOT`` covers its interpreter's
    ``sys.path`` (here a stand-in: a directory and a missing zip); a missing model
    directory is one line and exit 1, no argument exit 2."""
    model = image / "opt" / "model"
    (image / "lib").mkdir()
    (image / "lib" / "os.py").write_text("")
    monkeypatch.setattr(sys, "path", [str(image / "lib"), str(image / "lib.zip")])
    assert main([str(model), str(image / "opt")]) == 0
    listing = read_listing(model, read_model_manifest(model))
    assert listing is not None and listing.roots == (str(image / "opt"), str(image / "lib"))
    assert listing.absent == (str(image / "lib.zip"),)
    assert main([str(image / "nowhere")]) == 1
    assert main([]) == 2
