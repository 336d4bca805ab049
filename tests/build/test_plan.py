"""The build plan and the rendered Dockerfile: pure, byte-for-byte comparable."""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from mmaas.build.context import TOOLKIT_DIR, compile_plan, package_plan, plan_builds, stage_context
from mmaas.build.plan import engine_inputs, make_plan
from mmaas.build.render import render_dockerfile
from mmaas.build.spec_checks import host_checks
from mmaas.spec.load import load_spec
from paths import FIXTURES, ROOT

GOLDEN = FIXTURES / "golden"


@pytest.fixture
def det(ppocr_models: dict[str, Path]):
    return load_spec(ROOT / "models" / "ppocr-det", checks=host_checks())


def plan_of(loaded, engine_dir=None, engine_key=None, buildkit=True, ca_bundle=None):
    """The compile plan of the single engine, or with ``engine_dir`` the package plan."""
    if engine_dir is not None:
        return package_plan(
            loaded, {"model": engine_key}, {"model": engine_dir}, ca_bundle, buildkit
        )
    return compile_plan(loaded, loaded.engines[0], engine_key, ca_bundle, buildkit)


@pytest.mark.parametrize("buildkit", [True, False], ids=["buildkit", "legacy"])
@pytest.mark.parametrize("phase", ["compile", "package"])
def test_rendered_dockerfile_matches_golden_file(det, buildkit: bool, phase: str) -> None:
    engine = Path("engine") if phase == "package" else None
    text = render_dockerfile(plan_of(det, buildkit=buildkit, engine_dir=engine))
    prefix = "ppocr-det.compile" if phase == "compile" else "ppocr-det"
    golden = GOLDEN / f"{prefix}.{'buildkit' if buildkit else 'legacy'}.Dockerfile"
    if os.environ.get("MMAAS_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text(), "run with MMAAS_UPDATE_GOLDEN=1 after a deliberate change"


def test_dockerfiles_order_layers_and_run_as_non_root(det) -> None:
    compile_ = render_dockerfile(plan_of(det))
    package = render_dockerfile(plan_of(det, engine_dir=Path("engine")))

    def framework(text: str) -> str:  # the shared stage, without the header line
        return text[text.index("\n") : text.index("ENV PATH=")]

    assert framework(compile_) == framework(package)  # one cached framework layer for both
    order = [
        "FROM mmaas/base:bookworm AS framework",
        "requirements-runtime.txt",
        "FROM framework AS builder",
        "COPY wheels/builder/",
        "COPY model/",
        "COPY engine-request.json",
        "python -m mmaas.stage build",
    ]
    assert [compile_.index(marker) for marker in order] == sorted(
        compile_.index(marker) for marker in order
    )
    assert "AS runtime" not in compile_ and "mmaas.stage stamp" not in compile_
    order = [
        "FROM framework AS builder",
        "COPY wheels/builder/",
        "COPY engine/ /opt/mmaas/engine/",
        "COPY build-request.json",
        "python -m mmaas.stage stamp",
        "FROM framework AS serving",
        "COPY --from=builder /opt/mmaas/engine/",
        "COPY wheels/runtime/",
        "[server,onnxruntime]",
        "COPY --from=builder /opt/mmaas/model/manifest.json",
        "python -m mmaas.core.model_dir",
        "FROM framework AS sbom-tool",
        "FROM serving AS sbom",
        "python -m mmaas.core.sbom",
        "FROM serving AS runtime",
        "COPY --from=sbom /opt/mmaas/sbom.cdx.json",
        "LABEL",
        "USER 10001",
        "ENTRYPOINT",
    ]
    assert [package.index(marker) for marker in order] == sorted(
        package.index(marker) for marker in order
    )
    assert "mmaas.stage build" not in package and "COPY model/" not in package
    assert "--mount=type=cache,target=/root/.cache/pip" in package
    assert "# syntax=" not in package  # a syntax line pulls a front-end image
    legacy = render_dockerfile(plan_of(det, buildkit=False, engine_dir=Path("engine")))
    assert "--mount" not in legacy and "--no-cache-dir" in legacy


def test_ca_bundle_is_copied_and_trusted_by_pip(det, tmp_path: Path) -> None:
    bundle = tmp_path / "corp.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    plan = plan_of(det, ca_bundle=bundle)
    text = render_dockerfile(plan)
    assert "COPY ca-bundle.pem /opt/mmaas/ca-bundle.pem" in text
    assert "PIP_CERT=/opt/mmaas/ca-bundle.pem" in text
    assert text.index("PIP_CERT") < text.index("MMAAS_PIP install")
    assert any(f.source == bundle and f.target == "ca-bundle.pem" for f in plan.files)
    assert "ca-bundle" not in render_dockerfile(plan_of(det))


def test_labels_env_and_build_request(det) -> None:
    plan = plan_of(det, engine_dir=Path("engine"))
    assert plan.image == "mmaas/ppocr-det:1.0.0"
    assert plan.labels["io.mmaas.model.name"] == "ppocr-det"
    assert plan.labels["org.opencontainers.image.version"] == "1.0.0"
    assert plan.labels["io.mmaas.spec.digest"] == det.spec.digest()
    assert plan.values["env"] == {
        "MMAAS_HTTP_PORT": "8000",
        "MMAAS_GRPC_PORT": "8001",
        "MMAAS_METRICS_PORT": "8002",
        "MMAAS_INSTANCE_COUNT": "1",
        "MMAAS_SHUTDOWN_GRACE_S": "25",
        "MMAAS_GRPC_KEEPALIVE_TIME_MS": "7200000",
        "MMAAS_GRPC_KEEPALIVE_TIMEOUT_MS": "20000",
        "MMAAS_GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS": "true",
        "MMAAS_GRPC_HTTP2_MIN_PING_INTERVAL_WITHOUT_DATA_MS": "5000",
        "MMAAS_GRPC_HTTP2_MAX_PING_STRIKES": "2",
    }
    stamp = json.loads(plan.generated["build-request.json"])
    assert (stamp["name"], stamp["version"], stamp["spec_digest"]) == (
        "ppocr-det",
        "1.0.0",
        det.spec.digest(),
    )
    (engine,) = stamp["engines"]
    assert (engine["name"], engine["directory"], engine["model"]["name"]) == (
        "model",
        ".",
        "ppocr-det",
    )
    assert engine["model"]["inputs"][0] == {
        "name": "x",
        "datatype": "FP32",
        "shape": [-1, 3, -1, -1],
        "min": [1, 3, 32, 32],
        "opt": [1, 3, 640, 640],
        "max": [4, 3, 1280, 1280],
        "optional": False,
        "sample_values": None,
    }
    assert stamp["assets"] == [] and stamp["pipeline"] is None
    request = json.loads(plan_of(det).generated["engine-request.json"])
    assert request["source"] == "model/ch_PP-OCRv4_det_infer.onnx"
    assert request["settings"]["graph_optimization_level"] == "all"


def test_plan_digest_follows_the_spec(det) -> None:
    first, again = plan_of(det), plan_of(det)
    assert first.digest == again.digest
    changed = det.spec.model_copy(update={"version": "1.0.1"})
    other = make_plan(changed, det.source_path, toolkit_dir=TOOLKIT_DIR, buildkit=True)
    assert other.digest != first.digest


def test_engine_request_leaves_out_what_does_not_change_the_engine(det) -> None:
    """C13: name, version, description, runtime settings, labels and the other back end's
    settings change neither the engine request nor the engine inputs (read by the
    compile), so the compile layer is reused."""
    first = plan_of(det)
    changed = det.spec.model_copy(
        update={
            "name": "renamed",
            "version": "2.0.0",
            "description": "new words",
            "runtime": det.spec.runtime.model_copy(update={"grpc_port": 9001, "instance_count": 2}),
            "image": det.spec.image.model_copy(update={"labels": {"team": "ocr"}}),
            "build": det.spec.build.model_copy(update={"workspace": 4096}),
        }
    )
    second = make_plan(changed, det.source_path, toolkit_dir=TOOLKIT_DIR, buildkit=True)
    assert second.generated["engine-request.json"] == first.generated["engine-request.json"]
    assert engine_inputs(changed, det.source_path, toolkit_dir=TOOLKIT_DIR) == engine_inputs(
        det.spec, det.source_path, toolkit_dir=TOOLKIT_DIR
    )
    request = json.loads(first.generated["engine-request.json"])
    assert (request["model"]["name"], request["model"]["version"]) == ("engine", "0")
    assert request["settings"] == {"graph_optimization_level": "all", "gpu": None}
    assert request["source"] == "model/ch_PP-OCRv4_det_infer.onnx"
    basic = det.spec.build.onnxruntime.model_copy(update={"graph_optimization_level": "basic"})
    stricter = det.spec.model_copy(
        update={"build": det.spec.build.model_copy(update={"onnxruntime": basic})}
    )
    third = make_plan(stricter, det.source_path, toolkit_dir=TOOLKIT_DIR, buildkit=True)
    assert third.generated["engine-request.json"] != first.generated["engine-request.json"]


def test_package_plan_stamps_the_engine_directory_without_compiling(det, tmp_path: Path) -> None:
    """The package build stages the verified engine directory (compiled just now or an
    engine-cache hit: the same build either way), not the ONNX file."""
    engine = tmp_path / "engine"
    engine.mkdir()
    for name in ("manifest.json", "model.ort.onnx", "report.json"):
        (engine / name).write_text(name)
    plan = plan_of(det, engine_key="sha256:" + "0" * 64, engine_dir=engine)
    assert "engine-request.json" not in plan.generated
    (stamped,) = json.loads(plan.generated["build-request.json"])["engines"]
    assert stamped["engine_key"] == "sha256:" + "0" * 64
    context = tmp_path / "context"
    context.mkdir()
    stage_context(plan, context)
    assert sorted(p.name for p in context.iterdir()) == [
        "Dockerfile",
        "build-request.json",
        "engine",
        "image-constraints.txt",
        "requirements-builder.txt",
        "requirements-runtime.txt",
        "sbom-tool.txt",
        "wheels",
    ]
    assert sorted(p.name for p in (context / "engine").iterdir()) == [
        "manifest.json",
        "model.ort.onnx",
        "report.json",
    ]


def test_staged_context_holds_only_this_models_build_inputs(det, tmp_path: Path) -> None:
    """C14: a repository with other models and .git around it; the context gets only
    this model's ONNX file, the generated request and the mmaas code."""
    context = tmp_path / "context"
    context.mkdir()
    stage_context(plan_of(det), context)
    top = sorted(p.name for p in context.iterdir())
    assert top == [
        "Dockerfile",
        "engine-request.json",
        "image-constraints.txt",
        "model",
        "requirements-builder.txt",
        "requirements-runtime.txt",
        "wheels",
    ]
    assert [p.name for p in (context / "model").iterdir()] == ["ch_PP-OCRv4_det_infer.onnx"]
    assert [p.name for p in (context / "wheels").iterdir()] == ["builder"]
    with zipfile.ZipFile(context / "wheels" / "builder" / "mmaas-0.1.0-py3-none-any.whl") as whl:
        packages = {name.split("/")[1] for name in whl.namelist() if name.startswith("mmaas/")}
    # the builder stage's code: the foundation, the stage and the back end, nothing else
    assert packages == {"__init__.py", "py.typed", "core", "stage", "backends"}
    assert not list(context.rglob("__pycache__"))


def test_a_symlinked_onnx_file_is_staged_as_its_bytes(det, tmp_path: Path) -> None:
    """A model folder whose ONNX file is a symbolic link (to a shared model store, by an
    absolute path): the context holds the file itself, not a link whose target does not
    exist inside the builder (CI's failure of 2026-12-01: NO_SUCHFILE in the compile)."""
    folder = tmp_path / "linked"
    folder.mkdir()
    (folder / "model.yaml").write_text((det.model_dir / "model.yaml").read_text())
    (folder / det.source_path.name).symlink_to(det.source_path.resolve())
    context = tmp_path / "context"
    context.mkdir()
    stage_context(plan_of(load_spec(folder, checks=host_checks())), context)
    staged = context / "model" / det.source_path.name
    assert not staged.is_symlink()
    assert staged.read_bytes() == det.source_path.read_bytes()


def test_external_data_files_are_staged_with_their_nested_paths(tmp_path: Path) -> None:
    """C14, nested files: an ONNX model whose weights live in external data files under a
    sub-folder gets those files into the context beside it, and nothing else."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    folder = tmp_path / "models" / "big"
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("not a build input")
    (folder / "weights").mkdir()
    weight = numpy_helper.from_array(np.ones((64, 64), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "big",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 64])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(
        model,
        str(folder / "big.onnx"),
        save_as_external_data=True,
        location="weights/big.bin",
        size_threshold=0,
    )
    (folder / "model.yaml").write_text(
        'name: big\nversion: "1"\nsource: {path: big.onnx}\nmax_batch_size: 2\n'
        "inputs:\n  - {name: x, min: [1, 64], opt: [1, 64], max: [2, 64]}\n"
    )
    _, compiles, _ = plan_builds(folder, buildkit=True)
    plan = compiles["model"]
    context = tmp_path / "context"
    context.mkdir()
    stage_context(plan, context)
    staged = sorted(
        str(p.relative_to(context / "model")) for p in (context / "model").rglob("*") if p.is_file()
    )
    assert staged == ["big.onnx", "weights/big.bin"]


@pytest.mark.parametrize("buildkit", [True, False], ids=["buildkit", "legacy"])
@pytest.mark.parametrize("phase", ["compile", "package"])
def test_rendered_dockerfiles_pass_hadolint(
    det, tmp_path: Path, buildkit: bool, phase: str
) -> None:
    import shutil
    import sys

    from mmaas.core import proc

    hadolint = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    dockerfile = tmp_path / "Dockerfile"
    engine = Path("engine") if phase == "package" else None
    dockerfile.write_text(render_dockerfile(plan_of(det, buildkit=buildkit, engine_dir=engine)))
    result = proc.run([hadolint, "--no-color", str(dockerfile)], check=False, what="hadolint")
    assert result.returncode == 0, result.stdout + result.stderr


def test_metrics_port_zero_turns_the_endpoint_off(det) -> None:
    runtime = det.spec.runtime.model_copy(update={"metrics_port": 0})
    off = replace(det, spec=det.spec.model_copy(update={"runtime": runtime}))
    plan = plan_of(off, engine_dir=Path("engine"))
    assert plan.values["env"]["MMAAS_METRICS_PORT"] == "0"
    assert "EXPOSE 8000 8001\n" in render_dockerfile(plan)


def test_http_port_is_exposed_and_set_and_zero_turns_it_off(det) -> None:
    plan = plan_of(det, engine_dir=Path("engine"))
    assert "EXPOSE 8000 8001 8002\n" in render_dockerfile(plan)
    runtime = det.spec.runtime.model_copy(update={"http_port": 0, "grpc_port": 9001})
    off = replace(det, spec=det.spec.model_copy(update={"runtime": runtime}))
    plan = plan_of(off, engine_dir=Path("engine"))
    assert plan.values["env"]["MMAAS_HTTP_PORT"] == "0"
    assert "EXPOSE 9001 8002\n" in render_dockerfile(plan)
