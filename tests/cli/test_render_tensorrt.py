"""``mmaas render`` and ``mmaas build`` of a TensorRT model, as real CLI subprocesses.

render: the real ppocr-det ONNX model switched to ``backend: tensorrt`` / fp16 prints the
compile and package Dockerfiles and the GPU route's exact command sequence, and stages
contexts those commands run in (checked: files, Dockerfile structure, hadolint). build: no
GPU here, so it must fail before any Docker work with the message naming the routes (C11).
"""

from __future__ import annotations

import os
import re
import shutil
import zipfile
from pathlib import Path

import pytest
from render_helpers import DOCKER, HADOLINT, mmaas, steps, tensorrt_model, trtexec_line

from mmaas.core import proc


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
