"""``mmaas render`` of ONNX Runtime models, as real CLI subprocesses: the builds it prints
with real paths, the commands run as pasted (docker), and a two-engine model's builds and
validation, engine by engine."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from render_helpers import DOCKER, mmaas, steps
from tests.ocr_model import write_ocr_model

from mmaas.core import proc
from paths import ROOT


def test_render_of_onnxruntime_prints_its_builds_with_real_paths(ppocr_models) -> None:
    """No CONTEXT placeholder: without --context the contexts are staged
    in MODEL/.mmaas/render and every command names them."""
    model = ROOT / "models" / "ppocr-det"
    ctx = model / ".mmaas" / "render"
    done = mmaas("render", str(model), "--buildkit")
    assert done.returncode == 0, done.stderr
    assert "CONTEXT" not in done.stdout + done.stderr
    assert done.stdout.startswith(
        f"# ==> {ctx}/compile/Dockerfile (compile build) <==\n"
        "# Rendered by mmaas from templates/Dockerfile.onnxruntime.j2"
    )
    package = done.stdout.split(f"# ==> {ctx}/package/Dockerfile (package build) <==\n")[1]
    assert package == (ctx / "package" / "Dockerfile").read_text()
    for marker in ("FROM serving AS runtime", "LABEL", "USER 10001", "ENTRYPOINT"):
        assert marker in package
    holder = "mmaas-ppocr-det-engine"
    assert steps(done.stderr) == [
        ["DOCKER_BUILDKIT=1", DOCKER, "build", "--file", f"{ctx}/compile/Dockerfile",
         "--tag", "mmaas/ppocr-det:engine", "--progress", "plain", f"{ctx}/compile"],
        [DOCKER, "create", "--name", holder, "mmaas/ppocr-det:engine"],
        [DOCKER, "cp", f"{holder}:/opt/mmaas/engine", f"{ctx}/package/engine"],
        [DOCKER, "rm", holder],
        ["DOCKER_BUILDKIT=1", DOCKER, "build", "--file", f"{ctx}/package/Dockerfile",
         "--tag", "mmaas/ppocr-det:1.0.0", "--progress", "plain", f"{ctx}/package"],
    ]  # fmt: skip
    assert (ctx / "compile" / "model" / ppocr_models["ppocr-det"].name).is_file()
    assert "compile command" not in done.stderr  # ONNX Runtime compiles through its API
    again = mmaas("render", str(model), "--buildkit")  # the folder is mmaas's: remade
    assert again.returncode == 0 and again.stderr == done.stderr


@pytest.mark.docker
@pytest.mark.slow
def test_rendered_onnxruntime_commands_run_as_pasted(
    ppocr_models, tmp_path: Path, docker_cli: list[str], base_image: str
) -> None:
    """Every command render prints, pasted into a shell line by line,
    builds the image, whose model directory `mmaas verify` accepts (the engine labels are
    `mmaas build`'s own last step, which render says it cannot print)."""
    folder = tmp_path / "det"
    folder.mkdir()
    onnx = ppocr_models["ppocr-det"]
    repository = f"mmaas-test/render-{os.urandom(4).hex()}"
    text = (ROOT / "models" / "ppocr-det" / "model.yaml").read_text()
    text = text.replace(f"path: {onnx.name}", f"path: {onnx}")
    (folder / "model.yaml").write_text(text + f"image: {{repository: {repository}}}\n")
    done = mmaas("render", str(folder))
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    commands = [lines[i + 1] for i, line in enumerate(lines) if re.match(r"# \d+/\d+ ", line)]
    assert len(commands) == 5
    try:
        for line in commands:
            ran = proc.run(["bash", "-c", line], check=False)
            assert ran.returncode == 0, f"{line}\n{ran.stdout[-2000:]}{ran.stderr[-2000:]}"
        holder = proc.run([*docker_cli, "create", f"{repository}:1.0.0"]).stdout.strip()
        proc.run([*docker_cli, "cp", f"{holder}:/opt/mmaas/model", str(tmp_path / "model")])
        proc.run([*docker_cli, "rm", holder])
        verified = mmaas("verify", str(tmp_path / "model"))
        assert verified.returncode == 0, verified.stderr
        assert f"copies /opt/mmaas/model out of {repository}:1.0.0, verifies it" in done.stderr
    finally:
        for tag in ("engine", "1.0.0"):
            proc.run([*docker_cli, "image", "rm", "--force", f"{repository}:{tag}"], check=False)


def test_render_and_validate_of_two_engines_cover_each_engine(ppocr_models, tmp_path: Path) -> None:
    """Each engine's compile build and engine copy, named by its engine, then the
    one package build (with the asset staged); validate lists both engines and the
    pipeline's signature."""
    model = write_ocr_model(tmp_path / "ocr", ppocr_models)
    ctx = model / ".mmaas" / "render"
    done = mmaas("render", str(model), "--buildkit")
    assert done.returncode == 0, done.stderr
    headers = re.findall(r"^# ==> (\S+) \((\w+) build\) <==$", done.stdout, re.MULTILINE)
    assert headers == [
        (f"{ctx}/compile/det/Dockerfile", "compile"),
        (f"{ctx}/compile/cls/Dockerfile", "compile"),
        (f"{ctx}/package/Dockerfile", "package"),
    ]
    comments = re.findall(r"^# \d+/9 (.*)$", done.stderr, re.MULTILINE)
    assert [c.split(":")[0] for c in comments] == ["engine det"] * 4 + ["engine cls"] * 4 + [
        "package build"
    ]
    copies = [argv[-1] for argv in steps(done.stderr) if argv[1:2] == ["cp"]]
    assert copies == [f"{ctx}/package/engine/det", f"{ctx}/package/engine/cls"]
    assert (ctx / "package" / "engine" / "assets" / "labels" / "cls.json").is_file()
    checked = mmaas("validate", str(model))
    assert checked.returncode == 0, checked.stderr
    for line in (
        "engine det (onnxruntime, fp32, max_batch_size 2), served as ocr-det",
        "engine cls (onnxruntime, fp32, max_batch_size 8), served as ocr-cls",
        "pipeline ensemble (served as ocr)",
        "input  crops FP32 [-1, 3, 48, 192]",
    ):
        assert line in checked.stdout
    report = json.loads(mmaas("validate", str(model), "--json").stdout)
    assert report["source"] is None and report["engine_command"] is None
    assert report["engines"] == {
        "det": {"served_as": "ocr-det", "source": str(model / "det.onnx")},
        "cls": {"served_as": "ocr-cls", "source": str(model / "cls.onnx")},
    }
    assert report["assets"] == {"labels": str(model / "labels" / "cls.json")}
    assert report["pipeline"]["served_as"] == "ocr"
    assert [t["name"] for t in report["pipeline"]["inputs"]] == ["image", "crops"]
