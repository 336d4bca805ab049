"""Model discovery (models/*/model.yaml) and command-line model arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from mmaas.core.errors import UsageError
from mmaas.spec.catalog import find_models, resolve_model
from paths import ROOT


def test_find_models_in_this_repository() -> None:
    found = find_models(ROOT)
    assert found == sorted(found)
    assert {"ppocr-cls", "ppocr-det", "ppocr-rec"} <= {path.parent.name for path in found}


def test_find_models_skips_folders_without_a_spec(tmp_path: Path) -> None:
    for name in ("b", "a", "no-spec"):
        (tmp_path / "models" / name).mkdir(parents=True)
    for name in ("b", "a"):
        (tmp_path / "models" / name / "model.yaml").write_text("name: x\n")
    (tmp_path / "models" / "a" / "nested").mkdir()
    (tmp_path / "models" / "a" / "nested" / "model.yaml").write_text("name: y\n")
    assert find_models(tmp_path) == [
        tmp_path / "models" / "a" / "model.yaml",
        tmp_path / "models" / "b" / "model.yaml",
    ]
    assert find_models(tmp_path / "elsewhere") == []


def test_resolve_model_accepts_folder_or_file() -> None:
    folder = ROOT / "models" / "ppocr-det"
    assert resolve_model(str(folder)) == folder / "model.yaml"
    assert resolve_model(str(folder / "model.yaml")) == folder / "model.yaml"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        ("nothing", "no such model folder or model.yaml"),
        ("dir", "no model.yaml in this folder; create one with `mmaas init"),
        ("file", "not a model spec; give a model folder or its model.yaml"),
    ],
)
def test_resolve_model_refuses(tmp_path: Path, make: str, message: str) -> None:
    target = tmp_path / "target"
    if make == "dir":
        target.mkdir()
    elif make == "file":
        target.write_text("x")
    with pytest.raises(UsageError, match=message):
        resolve_model(str(target))
