"""The image's file listing (mmaas.core.file_listing) on a real file tree: every file,
link and link chain leaving the roots is listed; every kind of change is refused, naming
the path: a changed, added or missing file, a retargeted link, a file at the end of a chain
changed, a path created where the interpreter's path was empty; the files the manifest
records by hash are listed without being hashed again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mmaas.core.errors import IntegrityError
from mmaas.core.file_listing import RECORDED, Listing, check, make_listing, observe_fs


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """``opt/`` (the root: model/, venv/ with a link chain leaving it) and ``usr/``
    (outside: the interpreter the chain ends at)."""
    model = tmp_path / "opt" / "model"
    venv = tmp_path / "opt" / "venv"
    (venv / "bin").mkdir(parents=True)
    model.mkdir()
    (model / "manifest.json").write_text("{}")
    (model / "engine.onnx").write_bytes(b"engine")
    (model / "report.json").write_text("{}")
    (venv / "app.py").write_text("print('served')\n")
    (tmp_path / "usr" / "bin").mkdir(parents=True)
    (tmp_path / "usr" / "bin" / "python3.11").write_bytes(b"\x7fELF")
    os.symlink("python3.11", tmp_path / "usr" / "bin" / "python3")
    os.symlink(str(tmp_path / "usr" / "bin" / "python3"), venv / "bin" / "python")
    os.symlink("app.py", venv / "alias.py")
    return tmp_path


def listing_of(tree: Path) -> Listing:
    path = [str(tree / "opt" / "venv"), str(tree / "lib" / "python311.zip")]
    return make_listing(
        tree / "opt" / "model", [str(tree / "opt")], [str(tree / "opt/model/engine.onnx")], path
    )


def refusal(tree: Path, listing: Listing) -> str:
    with pytest.raises(IntegrityError) as info:
        check(listing, observe_fs(listing), "image")
    return info.value.message


def test_the_listing_holds_roots_links_chains_and_absent_paths(tree: Path) -> None:
    listing = listing_of(tree)
    opt, usr = str(tree / "opt"), str(tree / "usr" / "bin")
    assert listing.roots == (opt,)
    assert listing.absent == (str(tree / "lib" / "python311.zip"),)
    assert listing.links == {
        f"{opt}/venv/bin/python": f"{usr}/python3",
        f"{opt}/venv/alias.py": "app.py",
        f"{usr}/python3": "python3.11",
    }
    assert set(listing.files) == {
        f"{opt}/model/engine.onnx",
        f"{opt}/model/report.json",
        f"{opt}/venv/app.py",
        f"{usr}/python3.11",
    }  # the manifest is not listed: it records the listing
    assert listing.files[f"{opt}/model/engine.onnx"] == RECORDED
    assert Listing.from_json(listing.to_json(), "x") == listing
    check(listing, observe_fs(listing), "image")  # unchanged: passes


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (lambda t: (t / "opt/venv/app.py").write_text("print('patched')\n"), "venv/app.py: a file"),
        (lambda t: (t / "opt/model/extra.bin").write_bytes(b"x"), "model/extra.bin: added"),
        (lambda t: (t / "opt/model/report.json").unlink(), "report.json: missing"),
        (lambda t: (t / "opt/model/engine.onnx").unlink(), "engine.onnx: missing"),
        (lambda t: (t / "usr/bin/python3.11").write_bytes(b"evil"), "python3.11: a file of"),
        (lambda t: (t / "usr/bin/python3").unlink(), "usr/bin/python3: missing"),
        (
            lambda t: (
                (t / "usr/bin/python3").unlink(),
                os.symlink("/tmp/evil", t / "usr/bin/python3"),
            ),
            "usr/bin/python3: a link to /tmp/evil, signed as a link to python3.11",
        ),
        (
            lambda t: ((t / "lib").mkdir(), (t / "lib/python311.zip").write_bytes(b"PK")),
            "python311.zip: created on the interpreter's path",
        ),
        (lambda t: (t / "lib/python311.zip").mkdir(parents=True), "python311.zip: created"),
    ],
    ids=[
        "patched",
        "added",
        "removed",
        "engine-removed",
        "interpreter",
        "chain-cut",
        "chain-retargeted",
        "absent-file",
        "absent-dir",
    ],
)
def test_every_change_is_refused_naming_the_path(tree: Path, change, fragment: str) -> None:
    listing = listing_of(tree)
    change(tree)
    message = refusal(tree, listing)
    assert fragment in message and "differ from the image's signed file listing" in message


def test_a_recorded_files_content_is_left_to_the_manifest(tree: Path) -> None:
    listing = listing_of(tree)
    (tree / "opt/model/engine.onnx").write_bytes(b"other engine")
    check(listing, observe_fs(listing), "image")  # the manifest's engine check refuses it
