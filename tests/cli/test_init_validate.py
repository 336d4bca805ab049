"""``mmaas init`` and ``mmaas validate`` through Click, wrapped in a throwaway group (the
root group's error handler maps the raised errors to exit codes; here the type is asserted)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from mmaas.cli import init, main, validate
from mmaas.core.errors import UsageError
from onnx_builder import FLOAT, make_onnx
from paths import FIXTURES


@click.group()
def group() -> None:
    """Throwaway root for the two commands under test."""


group.add_command(init.command)
group.add_command(validate.command)


def invoke(*args: str) -> Result:
    return CliRunner().invoke(group, list(args))


def test_init_then_validate(tmp_path: Path) -> None:
    onnx_path = make_onnx(tmp_path / "onnx" / "m.onnx", [("onnx::Conv_1", FLOAT, ["N", 3, "T"])])
    folder = tmp_path / "models" / "conv"
    made = invoke("init", str(folder), "--onnx", str(onnx_path), "--max-batch-size", "2")
    assert made.exit_code == 0, made.output
    assert made.output.startswith(
        f"wrote {folder / 'model.yaml'} (1 inputs, 1 outputs, max_batch_size 2)"
    )
    assert (
        "  path: ../../onnx/m.onnx  # relative to this folder\n"
        in (folder / "model.yaml").read_text()
    )
    checked = invoke("validate", str(folder))
    assert checked.exit_code == 0, checked.output
    assert checked.output.splitlines() == [
        f"ok: {folder / 'model.yaml'}: conv 1.0.0 (onnxruntime, fp32, max_batch_size 2)",
        f"  source: {folder / '../../onnx/m.onnx'}",
        "  input  onnx::Conv_1 FP32 [-1, 3, -1]  min 1x3x1  opt 1x3x128  max 2x3x512",
        "  output onnx::Conv_1_out FP32 [-1, 3, -1]",
    ]


def test_init_refuses_overwrite_unless_forced(tmp_path: Path) -> None:
    onnx_path = make_onnx(tmp_path / "m.onnx", [("x", FLOAT, [1, 2])])
    assert invoke("init", str(tmp_path / "m"), "--onnx", str(onnx_path)).exit_code == 0
    again = invoke("init", str(tmp_path / "m"), "--onnx", str(onnx_path))
    assert isinstance(again.exception, UsageError)
    assert "pass --force to overwrite it" in str(again.exception)
    forced = invoke(
        "init", str(tmp_path / "m"), "--onnx", str(onnx_path), "--force", "--name", "renamed"
    )
    assert forced.exit_code == 0
    assert "name: renamed\n" in (tmp_path / "m" / "model.yaml").read_text()


def test_init_with_a_missing_onnx_file(tmp_path: Path) -> None:
    result = invoke("init", str(tmp_path / "m"), "--onnx", str(tmp_path / "none.onnx"))
    assert result.exit_code == 2  # a usage error, named by click
    assert "'--onnx'" in result.output and "does not exist" in result.output
    assert not (tmp_path / "m").exists()


def test_validate_json_ok(ppocr_models: dict[str, Path]) -> None:
    folder = ppocr_models["ppocr-det"].parent
    result = invoke("validate", str(folder / "model.yaml"), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["ok"] is True and report["source"] == str(ppocr_models["ppocr-det"])
    assert report["digest"].startswith("sha256:")
    assert report["spec"]["inputs"][0] == {
        "name": "x",
        "datatype": "FP32",
        "shape": [-1, 3, -1, -1],
        "min": [1, 3, 32, 32],
        "opt": [1, 3, 640, 640],
        "max": [4, 3, 1280, 1280],
        "sample_values": None,
    }


def test_validate_json_problems_on_stdout_and_spec_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the console entry point: the error handler prints the JSON on stdout."""
    fixture = FIXTURES / "specs" / "c5_norway"
    shutil.copytree(fixture, tmp_path / "norway")
    make_onnx(tmp_path / "norway" / "model.onnx", [(n, FLOAT, [1]) for n in ("no", "on", "null")])
    with pytest.raises(SystemExit) as exited:
        main(["validate", str(tmp_path / "norway"), "--json"])
    assert exited.value.code == 2
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["error"] == "SpecError"
    assert [(p["key_path"], p["line"], p["column"]) for p in report["problems"]] == [
        ("build.timing_cache", 5, 17),
        ("inputs[2].name", 9, 11),
    ]
    assert report["problems"][1]["message"].endswith('quote it: name: "null"')


@pytest.mark.parametrize("target", ["missing-folder", "empty-folder", "notes.txt"])
def test_validate_needs_a_model(
    tmp_path: Path, target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty-folder").mkdir()
    (tmp_path / "notes.txt").write_text("hi")
    result = invoke("validate", target)
    assert isinstance(result.exception, UsageError)
    assert str(result.exception).startswith(f"{target}: ")


def test_help_explains_itself() -> None:
    assert "optimization profile" in invoke("init", "--help").output
    assert "--json" in invoke("validate", "--help").output
