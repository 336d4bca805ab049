"""``mmaas render`` and ``mmaas build`` of a TensorRT model, as real CLI subprocesses.

render: the real ppocr-det ONNX model switched to ``backend: tensorrt`` / fp16 prints the
compile and package Dockerfiles and the GPU route's exact command sequence, and stages
contexts those commands run in (checked: files, Dockerfile structure, hadolint). build: no
GPU here, so it must fail before any Docker work with the message naming the routes (C11).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

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
    return [
        shlex.split(line.split(": ", 1)[1])
        for line in stderr.splitlines()
        if line.startswith("# run ")
    ]


def test_render_prints_the_exact_gpu_command_sequence(ppocr_models, tmp_path: Path) -> None:
    model = tensorrt_model(tmp_path / "det", ppocr_models["ppocr-det"])
    ctx = tmp_path / "ctx"
    cache_dir = tmp_path / "timing-caches"
    env = {"MMAAS_TIMING_CACHE_DIR": str(cache_dir), "MMAAS_DOCKER": DOCKER}
    done = mmaas("render", str(model), "--buildkit", "--context", str(ctx), env=env)
    assert done.returncode == 0, done.stderr
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
        assert "mmaas/backends/tensorrt/trtexec/argv.py" in names
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
        "FROM framework AS runtime",
    ]
    assert re.findall(r"^FROM .*$", compile_file, re.MULTILINE) == froms[:1]
    runtime = package_file[package_file.index("AS runtime") :]
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


def test_render_of_onnxruntime_prints_its_builds(ppocr_models) -> None:
    done = mmaas("render", str(ROOT / "models" / "ppocr-det"), "--buildkit")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        "# ==> CONTEXT/compile/Dockerfile (compile build) <==\n"
        "# Rendered by mmaas from templates/Dockerfile.onnxruntime.j2"
    )
    package = done.stdout.split("# ==> CONTEXT/package/Dockerfile (package build) <==\n")[1]
    assert package.startswith("# Rendered by mmaas from templates/Dockerfile.onnxruntime.j2")
    for marker in ("FROM framework AS runtime", "LABEL", "USER 10001", "ENTRYPOINT"):
        assert marker in package
    lines = [line for line in done.stderr.splitlines() if line.startswith("# ")]
    assert lines[0] == (
        f"# build: DOCKER_BUILDKIT=1 {shlex.join([DOCKER])} build --file CONTEXT/compile/"
        "Dockerfile --tag mmaas/ppocr-det:engine --progress plain CONTEXT/compile"
    )
    assert lines[1] == (
        f"# package build: DOCKER_BUILDKIT=1 {shlex.join([DOCKER])} build --file CONTEXT/"
        "package/Dockerfile --tag mmaas/ppocr-det:1.0.0 --progress plain CONTEXT/package"
    )


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
