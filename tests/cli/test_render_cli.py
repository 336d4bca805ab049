"""``mmaas render`` and ``mmaas build`` of a TensorRT model, as real CLI subprocesses.

render: the real ppocr-det ONNX model switched to ``backend: tensorrt`` / fp16 prints the
compile and package Dockerfiles and the GPU route's exact command sequence, and stages
contexts those commands run in (checked: files, Dockerfile structure, hadolint). build: no
GPU here, so it must fail before any Docker work with the message naming the routes (C11).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
import zipfile
from pathlib import Path

import pytest
from tests.ocr_model import write_ocr_model

from mmaas.core import proc
from paths import ROOT

MMAAS = str(Path(sys.executable).with_name("mmaas"))
HADOLINT = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
DOCKER = os.environ.get("MMAAS_DOCKER") or shutil.which("docker") or "docker"


def tensorrt_model(folder: Path, onnx: Path) -> Path:
    """A model folder whose model.yaml is ppocr-det's, switched to TensorRT at fp16, with
    the source path pointing at the real ONNX file."""
    text = (ROOT / "models" / "ppocr-det" / "model.yaml").read_text()
    text = text.replace("backend: onnxruntime ", "backend: tensorrt ")
    text = text.replace("target_precision: fp32 ", "target_precision: fp16 ")
    text = text.replace(f"path: {onnx.name}", f"path: {onnx}")
    assert "backend: tensorrt" in text and str(onnx) in text
    folder.mkdir()
    (folder / "model.yaml").write_text(text)
    return folder


def mmaas(*args: str, env: dict[str, str] | None = None):
    return proc.run([MMAAS, *args], check=False, env=env, what="mmaas")


def steps(stderr: str) -> list[list[str]]:
    """The printed commands: the shell line after each ``# N/M what`` comment."""
    lines = stderr.splitlines()
    return [
        shlex.split(lines[index + 1])
        for index, line in enumerate(lines)
        if re.match(r"# \d+/\d+ ", line)
    ]


def trtexec_line(stderr: str) -> list[str]:
    """The compile's own command render prints (a comment: it runs in the container)."""
    lines = stderr.splitlines()
    index = lines.index("# the compile command the builder stage runs, in its engine directory:")
    return shlex.split(lines[index + 1].removeprefix("#   "))


def test_render_prints_the_exact_gpu_command_sequence(ppocr_models, tmp_path: Path) -> None:
    model = tensorrt_model(tmp_path / "det", ppocr_models["ppocr-det"])
    ctx = tmp_path / "ctx"
    cache_dir = tmp_path / "timing-caches"
    env = {"MMAAS_TIMING_CACHE_DIR": str(cache_dir), "MMAAS_DOCKER": DOCKER}
    done = mmaas("render", str(model), "--buildkit", "--context", str(ctx), env=env)
    assert done.returncode == 0, done.stderr
    assert f"# 3/5 the compile on a GPU: trtexec, profile check, gates, hashes\n{DOCKER} run" in (
        done.stderr
    )
    assert steps(done.stderr) == [
        ["DOCKER_BUILDKIT=1", DOCKER, "build", "--file", f"{ctx}/compile/Dockerfile",
         "--tag", "mmaas/ppocr-det:1.0.0-builder", "--progress", "plain",
         "--target", "builder", f"{ctx}/compile"],
        ["mkdir", "-p", f"{ctx}/out", str(cache_dir)],
        [DOCKER, "run", "--rm", "--gpus", "all", "--user", f"{os.getuid()}:{os.getgid()}",
         "--volume", f"{cache_dir}:/opt/mmaas/timing-cache",
         "--volume", f"{ctx}/out:/opt/mmaas/out", "mmaas/ppocr-det:1.0.0-builder"],
        ["cp", "-a", f"{ctx}/out/engine", f"{ctx}/package/engine"],
        ["DOCKER_BUILDKIT=1", DOCKER, "build", "--file", f"{ctx}/package/Dockerfile",
         "--tag", "mmaas/ppocr-det:1.0.0", "--progress", "plain", f"{ctx}/package"],
    ]  # fmt: skip
    assert not cache_dir.exists()  # render builds and creates nothing but the contexts
    compile_file = (ctx / "compile" / "Dockerfile").read_text()
    package_file = (ctx / "package" / "Dockerfile").read_text()
    assert done.stdout == (
        f"# ==> {ctx}/compile/Dockerfile (compile build) <==\n{compile_file}"
        f"# ==> {ctx}/package/Dockerfile (package build) <==\n{package_file}"
    )


def test_render_refuses_a_context_folder_that_exists(ppocr_models, tmp_path: Path) -> None:
    """--context DIR must not exist: a second render into it, or a DIR that is the model's
    own folder, is a usage error (exit 2) that names the option, and nothing is written."""
    model = tensorrt_model(tmp_path / "det", ppocr_models["ppocr-det"])
    ctx = tmp_path / "ctx"
    assert mmaas("render", str(model), "--no-buildkit", "--context", str(ctx)).returncode == 0
    for existing in (ctx, model):
        before = sorted(p.relative_to(existing) for p in existing.rglob("*"))
        again = mmaas("render", str(model), "--no-buildkit", "--context", str(existing))
        assert again.returncode == 2, again.stderr
        assert f"--context {existing}: already exists" in again.stderr
        assert "Traceback" not in again.stderr and "internal error" not in again.stderr
        assert sorted(p.relative_to(existing) for p in existing.rglob("*")) == before


def test_render_stages_contexts_the_commands_run_in(ppocr_models, tmp_path: Path) -> None:
    model = tensorrt_model(tmp_path / "det", ppocr_models["ppocr-det"])
    ctx = tmp_path / "ctx"
    done = mmaas("render", str(model), "--no-buildkit", "--context", str(ctx))
    assert done.returncode == 0, done.stderr
    compile_ctx, package_ctx = ctx / "compile", ctx / "package"
    onnx = ppocr_models["ppocr-det"]
    assert (compile_ctx / "model" / onnx.name).read_bytes() == onnx.read_bytes()
    assert (compile_ctx / "engine-request.json").is_file()
    wheel = "mmaas-0.1.0-py3-none-any.whl"
    for context in (compile_ctx, package_ctx):  # the builder stage's code, as a wheel
        with zipfile.ZipFile(context / "wheels" / "builder" / wheel) as archive:
            names = archive.namelist()
        assert "mmaas/backends/tensorrt/builder/trtexec/argv.py" in names
        assert "mmaas/stage/build.py" in names and not any("mmaas/cli" in n for n in names)
    assert (package_ctx / "wheels" / "runtime" / wheel).is_file()
    assert not (package_ctx / "model").exists()  # the package build never sees the ONNX
    assert not (package_ctx / "engine").exists()  # step 4 copies the compiled one in
    compile_file = (compile_ctx / "Dockerfile").read_text()
    package_file = (package_ctx / "Dockerfile").read_text()
    froms = re.findall(r"^FROM .*$", package_file, re.MULTILINE)
    assert froms == [
        "FROM nvcr.io/nvidia/tensorrt:25.08-py3 AS builder",
        "FROM nvcr.io/nvidia/cuda:13.0.0-runtime-ubuntu24.04 AS framework",
        "FROM framework AS serving",
        "FROM framework AS sbom-tool",
        "FROM serving AS sbom",
        "FROM serving AS runtime",
    ]
    assert re.findall(r"^FROM .*$", compile_file, re.MULTILINE) == froms[:1]
    runtime = package_file[package_file.index("AS serving") :]  # serving, SBOM, runtime
    order = [
        runtime.index(s)
        for s in ("useradd", "COPY --from=builder /opt/mmaas/engine/", "COPY wheels/runtime/",
                  "mmaas.core.model_dir", "LABEL", "USER 10001")
    ]  # fmt: skip
    assert order == sorted(order)
    for text in (compile_file, package_file):
        assert "--mount=type=cache" not in text
        assert not re.search(r"(?i)(password|token|secret|api[_-]?key)\s*=", text)
    for dockerfile in (compile_ctx / "Dockerfile", package_ctx / "Dockerfile"):
        lint = proc.run([HADOLINT, "--no-color", str(dockerfile)], check=False)
        assert lint.returncode == 0, lint.stdout + lint.stderr
    assert "DOCKER_BUILDKIT=0" in steps(done.stderr)[0]


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


def test_contract_render_prints_the_trtexec_argv_the_compile_runs(
    ppocr_models, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trtexec line render prints is the argv the compiler builds from the compile
    context render staged (its engine request and ONNX file): compared whole, but for
    where the ONNX file sits (the template copies model/ to /opt/mmaas/build/model)."""
    from mmaas.backends.tensorrt.builder.trtexec.command import compile_argv
    from mmaas.backends.tensorrt.builder.trtexec.network import network_inputs
    from mmaas.stage.build import read_request

    model = tensorrt_model(tmp_path / "det", ppocr_models["ppocr-det"])
    ctx = tmp_path / "ctx"
    done = mmaas("render", str(model), "--buildkit", "--context", str(ctx))
    assert done.returncode == 0, done.stderr
    printed = trtexec_line(done.stderr)
    request = read_request(ctx / "compile" / "engine-request.json").compile
    staged = compile_argv(
        request.model,
        request.settings,
        request.settings.version,
        network_inputs(request.source),
        onnx=str(request.source),
        typed_graph=False,
    )
    onnx = f"--onnx=/opt/mmaas/build/model/{ppocr_models['ppocr-det'].name}"
    assert printed == [staged[0], onnx, *staged[2:]]
    assert printed[:6] == [
        "/usr/src/tensorrt/bin/trtexec", onnx, "--saveEngine=model.plan",
        "--minShapes=x:1x3x32x32", "--optShapes=x:1x3x640x640", "--maxShapes=x:4x3x1280x1280",
    ]  # fmt: skip
    template = (ctx / "compile" / "Dockerfile").read_text()
    assert "COPY model/ /opt/mmaas/build/model/" in template


def test_render_refuses_what_the_pinned_tensorrt_release_refuses(
    ppocr_models, tmp_path: Path
) -> None:
    model = tensorrt_model(tmp_path / "det", ppocr_models["ppocr-det"])
    spec = model / "model.yaml"
    spec.write_text(
        spec.read_text() + 'build: {tensorrt: {version: "8.5", builder_optimization_level: 5}}\n'
    )
    done = mmaas("render", str(model), "--buildkit", "--context", str(tmp_path / "ctx"))
    assert done.returncode == 2
    assert "build.tensorrt.builder_optimization_level: trtexec of TensorRT 8.4.x-era" in (
        done.stderr
    )
    assert not (tmp_path / "ctx").exists()


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this host has a GPU")
def test_build_without_gpu_fails_before_any_docker_work(ppocr_models, tmp_path: Path) -> None:
    model = tensorrt_model(tmp_path / "det", ppocr_models["ppocr-det"])
    # a client that cannot exist: touching Docker would fail with "cannot reach a Docker engine"
    env = {**os.environ, "MMAAS_DOCKER": str(tmp_path / "no-docker")}
    done = mmaas("build", str(model), env=env)
    assert done.returncode == 1
    assert done.stderr.startswith("error: no NVIDIA GPU is visible here (nvidia-smi not found")
    for route in ("docker run --gpus all", '"default-runtime": "nvidia"', "CDI devices"):
        assert route in done.stderr
    assert "Docker engine" not in done.stderr and "Traceback" not in done.stderr


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
