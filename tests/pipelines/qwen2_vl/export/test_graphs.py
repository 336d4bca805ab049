"""The two graphs ``mmaas convert qwen2-vl`` exports (models/qwen-vl): their signatures, the
vision graph's CUDA-graph rule (no node reads the shape of grid_thw) and its use of grid_thw,
and the builder stage's profile check on the vision graph and on the known-bad plain trace
(the language graph's modes: test_language.py).

The conversion itself is the one set-up made (the ``qwen_vl_export`` fixture re-runs it only
when it is missing or made by other code); the builder stage runs as a real subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import yaml

from mmaas.build.context import plan_builds, stage_context
from mmaas.build.spec_checks import host_checks
from mmaas.core.errors import SpecError
from mmaas.pipelines.qwen2_vl.convert import checkpoint as checkpoints
from mmaas.pipelines.qwen2_vl.export import validate, vision
from mmaas.spec.load import load_spec

pytestmark = pytest.mark.slow
VISION, LANGUAGE = "qwen2_vl_vision.onnx", "qwen2_vl_language.onnx"
# A single-engine spec of the vision graph alone (what embedding clients are served).
VISION_SPEC = {
    "name": "qwen-vl-vision",
    "version": "1.0.0",
    "source": {"path": VISION},
    "backend": "onnxruntime",
    "target_precision": "fp32",
    "max_batch_size": 0,
    "inputs": [
        {"name": "pixel_values", "datatype": "FP32", "shape": [-1, 1176],
         "min": [4, 1176], "opt": [1024, 1176], "max": [4096, 1176]},
        {"name": "grid_thw", "datatype": "INT64", "shape": [-1, 3],
         "min": [1, 3], "opt": [1, 3], "max": [8, 3]},
    ],
    "outputs": [{"name": "image_embeds", "datatype": "FP32"}],
}  # fmt: skip


def dims(value: onnx.ValueInfoProto) -> list[str | int]:
    return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]


def test_the_graphs_declare_their_dynamic_axes(qwen_vl_export: Path) -> None:
    graph = onnx.load(str(qwen_vl_export / VISION)).graph
    assert [(i.name, dims(i)) for i in graph.input] == [
        ("pixel_values", ["num_patches", 1176]),
        ("grid_thw", ["num_images", 3]),
    ]
    assert [(o.name, dims(o)) for o in graph.output] == [
        ("image_embeds", ["(num_patches//4)", 256])
    ]
    graph = onnx.load(str(qwen_vl_export / LANGUAGE)).graph
    inputs = {i.name: dims(i) for i in graph.input}
    assert list(inputs)[:4] == ["inputs_embeds", "position_ids", "seqlens_k", "logits_index"]
    assert inputs["position_ids"] == [3, "batch", "seq"]
    assert inputs["seqlens_k"] == inputs["logits_index"] == ["batch"]
    assert inputs["past_key_values.3.value"] == ["batch", 2, 4096, 64]  # the cache's capacity
    outputs = {o.name: dims(o) for o in graph.output}
    assert outputs["logits"] == ["batch", 4096]
    assert outputs["top_ids"] == ["batch", 64]
    assert list(outputs)[3:5] == ["present.0.key", "present.0.value"]
    assert len(outputs) == 3 + 2 * 4


def test_no_vision_node_reads_the_shape_of_grid_thw(qwen_vl_export: Path) -> None:
    """num_images - 1 from Shape(grid_thw) would be CPU shape arithmetic feeding a device
    Clip (a Memcpy node: CUDA-graph capture refused; see export/vision.py); the export takes
    it from the data instead."""
    graph = onnx.load(str(qwen_vl_export / VISION)).graph
    readers = [n.op_type for n in graph.node if "grid_thw" in n.input]
    assert "Shape" not in readers and readers
    # ... and the bound still works: several images, each in its own attention segment
    model = checkpoints.load_model(qwen_vl_export / "checkpoint")
    grids = [((1, 4, 6), (1, 2, 2), (1, 8, 8)), ((1, 2, 2),) * 8]
    assert len(validate.validate_vision(qwen_vl_export / VISION, model.model.visual, grids)) == 2


def test_grid_thw_drives_the_positions(qwen_vl_export: Path) -> None:
    session = ort.InferenceSession(str(qwen_vl_export / VISION), providers=["CPUExecutionProvider"])
    pixels, _ = vision.sample_inputs(((1, 8, 12),))
    run = [session.run(None, {"pixel_values": pixels.numpy(), "grid_thw": np.array([g])})[0]
           for g in ([1, 8, 12], [1, 12, 8])]  # fmt: skip
    # a swapped grid moves the output by ~0.7 % of its scale: 3000x the FP32 noise (2e-6)
    assert np.abs(run[0] - run[1]).max() > 1e-3 * np.abs(run[0]).max()


def run_stage(*args: Path | str) -> subprocess.CompletedProcess[str]:
    """``python -m mmaas.stage ARGS`` in a subprocess, as the Dockerfile runs it."""
    argv = [sys.executable, "-m", "mmaas.stage", *map(str, args)]
    return subprocess.run(argv, capture_output=True, text=True, check=False)


def vision_model_dir(folder: Path, onnx_file: Path, spec: dict) -> Path:
    folder.mkdir()
    (folder / "model.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    (folder / VISION).symlink_to(onnx_file)
    return folder


def compile_engine(model_dir: Path, work: Path) -> subprocess.CompletedProcess[str]:
    """Plan and stage the build context as `mmaas build` does, then run the builder
    stage's compile and profile check on it (``work/engine``), without Docker."""
    _, compiles, _ = plan_builds(model_dir, buildkit=False)
    (plan,) = compiles.values()
    (work / "context").mkdir(parents=True)
    stage_context(plan, work / "context")
    return run_stage("build", work / "context" / "engine-request.json", work / "engine")


def test_the_vision_graph_passes_the_build_profile_check(qwen_vl_export: Path, tmp_path) -> None:
    folder = vision_model_dir(tmp_path / "vision", qwen_vl_export / VISION, VISION_SPEC)
    result = compile_engine(folder, tmp_path / "work")
    assert result.returncode == 0, result.stderr[-3000:]
    checks = json.loads(result.stdout)["profile_check"]
    assert [(c["point"], c["outputs"]["image_embeds"]) for c in checks] == [
        ("min", [1, 256]),
        ("opt", [256, 256]),
        ("max", [1024, 256]),
    ]


@pytest.fixture(scope="module")
def broken_onnx(qwen_vl_export: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("broken") / VISION
    model = checkpoints.load_model(qwen_vl_export / "checkpoint")
    vision.export_broken_trace(model.model.visual, path)
    return path


def test_the_broken_trace_is_refused_by_the_spec_check(broken_onnx: Path, tmp_path) -> None:
    folder = vision_model_dir(tmp_path / "broken", broken_onnx, VISION_SPEC)
    with pytest.raises(SpecError, match="the ONNX model has no input 'grid_thw'"):
        load_spec(folder, checks=host_checks())


def test_the_broken_trace_fails_the_build_profile_check(broken_onnx: Path, tmp_path) -> None:
    # The spec a user writes for the broken graph's own signature (grid_thw was dropped):
    # it validates, and only running the engine at the profile's shapes shows the lie.
    spec = {**VISION_SPEC, "inputs": VISION_SPEC["inputs"][:1]}
    folder = vision_model_dir(tmp_path / "broken", broken_onnx, spec)
    result = compile_engine(folder, tmp_path)
    assert result.returncode == 1
    assert "profile check failed at the min shapes (pixel_values: 4x1176)" in result.stderr
    assert not (tmp_path / "engine").exists()
