"""The staged build context (C14): the package build stamps the verified engine directory
without compiling; a compile's context holds only this model's build inputs, a symlinked
ONNX file as its bytes and external data files at their nested paths."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from plans import plan_of

from mmaas.build.context import plan_builds, stage_context
from mmaas.build.spec_checks import host_checks
from mmaas.spec.load import load_spec


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
