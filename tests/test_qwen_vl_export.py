"""The Qwen2-VL vision encoder example (models/qwen-vl): export, correctness over the profile,
the builder stage's profile check on the good export and on the known-bad plain trace, the
example client's preprocessing, and client -> real server == in-process ONNX Runtime.

The small randomly initialised export (scripts/export_qwen_vl.py, seed 0) is made once per
module; the builder stage and the server run as real subprocesses, as in an image build.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
import yaml
from PIL import Image
from scripts import export_qwen_vl as exporter
from scripts import qwen_vl_client as client
from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

from mmaas.build.pipeline import plan_model, stage_context
from mmaas.core.errors import SpecError
from mmaas.spec.load import load_spec
from server.conftest import launch  # the server fixtures' launcher

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "models" / "qwen-vl" / "model.yaml"
ONNX_NAME = "qwen2_vl_vision.onnx"


@pytest.fixture(scope="module")
def encoder() -> torch.nn.Module:
    """The small random encoder the default export uses (seed 0)."""
    return exporter.random_model(exporter.small_config(), seed=0)


@pytest.fixture(scope="module")
def good_model_dir(encoder, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of models/qwen-vl with the small export beside its model.yaml."""
    folder = tmp_path_factory.mktemp("qwen-vl")
    (folder / "model.yaml").write_text(SPEC.read_text())
    exporter.export_encoder(encoder, folder / ONNX_NAME)
    return folder


@pytest.fixture(scope="module")
def broken_onnx(encoder, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("broken") / ONNX_NAME
    exporter.export_broken_trace(encoder, path)
    return path


def run_stage(*args: Path | str) -> subprocess.CompletedProcess[str]:
    """``python -m mmaas.stage ARGS`` in a subprocess, as the Dockerfile runs it."""
    argv = [sys.executable, "-m", "mmaas.stage", *map(str, args)]
    return subprocess.run(argv, capture_output=True, text=True, check=False)


def compile_engine(model_dir: Path, work: Path) -> subprocess.CompletedProcess[str]:
    """Plan and stage the build context as `mmaas build` does (``work/context``), then run
    the builder stage's compile and profile check on it (``work/engine``), without Docker."""
    _, plan = plan_model(model_dir, buildkit=False)
    (work / "context").mkdir(parents=True)
    stage_context(plan, work / "context")
    return run_stage("build", work / "context" / "engine-request.json", work / "engine")


def relative_diff(actual: np.ndarray, expected: np.ndarray) -> float:
    return float(np.abs(actual - expected).max() / np.abs(expected).max())


def test_export_keeps_grid_thw_and_declares_the_dynamic_axes(good_model_dir: Path) -> None:
    graph = onnx.load(str(good_model_dir / ONNX_NAME), load_external_data=False).graph

    def dims(value: onnx.ValueInfoProto) -> list[str | int]:
        return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]

    assert [(i.name, dims(i)) for i in graph.input] == [
        ("pixel_values", ["num_patches", 1176]),
        ("grid_thw", ["num_images", 3]),
    ]
    assert [(o.name, dims(o)) for o in graph.output] == [
        ("image_embeds", ["(num_patches//4)", 128])
    ]


# Relative tolerance 1e-5 (exporter.RELATIVE_TOLERANCE): FP32 kernels that sum in another
# order differ by a few ulps per op; measured ~2e-6 of the largest value. A wrong position
# layout or attention mask moves the output by ~0.5 of it (next test), 5 orders above.
@pytest.mark.parametrize(
    "grids",
    [((1, 32, 32),), ((1, 22, 36),), ((1, 16, 16), (1, 12, 20))],
    ids=["448x448-opt", "308x504", "two-images"],
)
def test_onnx_runtime_equals_pytorch_inside_the_profile(good_model_dir, encoder, grids) -> None:
    [row] = exporter.validate(good_model_dir / ONNX_NAME, encoder, (grids,))
    assert row["shape"] == [sum(t * h * w for t, h, w in grids) // 4, 128]
    assert row["max_abs_diff"] <= exporter.RELATIVE_TOLERANCE * row["max_abs_ref"]


def test_grid_thw_drives_the_positions(good_model_dir: Path, encoder) -> None:
    pixels, grid = exporter.sample_inputs(((1, 8, 12),))
    with torch.no_grad():
        expected = encoder(pixels, grid).pooler_output.numpy()
    transposed = client.infer_local(
        good_model_dir / ONNX_NAME, pixels.numpy(), np.array([[1, 12, 8]])
    )
    assert relative_diff(transposed, expected) > 0.1


def test_export_is_byte_stable_for_a_seed(good_model_dir: Path, encoder, tmp_path: Path) -> None:
    again = tmp_path / ONNX_NAME
    exporter.export_encoder(encoder, again)
    first = hashlib.sha256((good_model_dir / ONNX_NAME).read_bytes()).hexdigest()
    assert hashlib.sha256(again.read_bytes()).hexdigest() == first


@pytest.fixture(scope="module")
def good_build(good_model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """The compile step's result on the small export, and its work directory."""
    work = tmp_path_factory.mktemp("build")
    return compile_engine(good_model_dir, work), work


def test_good_export_passes_the_build_profile_check(good_build) -> None:
    result, _ = good_build
    assert result.returncode == 0, result.stderr[-3000:]
    checks = json.loads(result.stdout)["profile_check"]
    assert [
        (c["point"], c["shapes"]["pixel_values"][0], c["outputs"]["image_embeds"]) for c in checks
    ] == [
        ("min", 256, [64, 128]),
        ("opt", 1024, [256, 128]),
        ("max", 9216, [2304, 128]),
    ]


def test_broken_trace_is_refused_by_the_spec_check(broken_onnx: Path, tmp_path: Path) -> None:
    (tmp_path / "model.yaml").write_text(SPEC.read_text())
    (tmp_path / ONNX_NAME).symlink_to(broken_onnx)
    with pytest.raises(SpecError, match="the ONNX model has no input 'grid_thw'"):
        load_spec(tmp_path)


def test_broken_trace_fails_the_build_profile_check(broken_onnx: Path, tmp_path: Path) -> None:
    # The spec a user writes for the broken graph's own signature (grid_thw was dropped):
    # it validates, and only running the engine at the profile's shapes shows the lie.
    spec = yaml.safe_load(SPEC.read_text())
    spec["inputs"] = [i for i in spec["inputs"] if i["name"] == "pixel_values"]
    folder = tmp_path / "qwen-vl-broken"
    folder.mkdir()
    (folder / "model.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    (folder / ONNX_NAME).symlink_to(broken_onnx)
    result = compile_engine(folder, tmp_path)
    assert result.returncode == 1
    assert "profile check failed at the opt shapes (pixel_values: 1024x1176)" in result.stderr
    assert "Attempting to broadcast an axis" in result.stderr
    assert not (tmp_path / "engine").exists()


@pytest.mark.parametrize(
    ("size", "grid"),
    [
        ((448, 448), [1, 32, 32]),  # the opt size
        ((500, 300), [1, 22, 36]),  # resized to 308x504, multiples of 28
        ((100, 80), [1, 16, 18]),  # below 224x224: scaled up into the profile
        ((3000, 2000), [1, 78, 116]),  # above 1344x1344: scaled down into the profile
    ],
)
def test_client_preprocessing_gives_the_patches_of_the_image(tmp_path: Path, size, grid) -> None:
    path = tmp_path / "image.png"
    pixels = np.random.default_rng(0).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path)
    pixel_values, grid_thw = client.preprocess(path)
    patches = grid[0] * grid[1] * grid[2]
    assert grid_thw.tolist() == [grid] and grid_thw.dtype == np.int64
    assert pixel_values.shape == (patches, 1176) and pixel_values.dtype == np.float32
    assert 256 <= patches <= 9216 and patches % 4 == 0


@pytest.fixture
def served(good_build, tmp_path: Path) -> Iterator[str]:
    """The real server (`python -m mmaas.server`) on the model directory that the image's
    package step stamps from the compiled engine."""
    result, work = good_build
    assert result.returncode == 0, result.stderr[-3000:]
    request = work / "context" / "build-request.json"
    stamped = run_stage("stamp", request, work / "engine", tmp_path / "model")
    assert stamped.returncode == 0, stamped.stderr[-3000:]
    server = launch(tmp_path / "model", tmp_path / "server.log")
    try:
        server.wait_serving()
        yield f"127.0.0.1:{server.port}"
    finally:
        server.stop()


def test_client_through_the_server_equals_in_process_onnx_runtime(
    served: str, good_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    images = []
    for size in ((448, 448), (640, 360)):
        images.append(tmp_path / f"{size[0]}x{size[1]}.png")
        noise = np.random.default_rng(size[0]).integers(0, 256, (size[1], size[0], 3))
        Image.fromarray(noise.astype(np.uint8)).save(images[-1])
    for image in images:
        assert client.main([str(image), "--url", served]) == 0
        remote = capsys.readouterr().out.splitlines()[-1]
        assert client.main([str(image), "--local", str(good_model_dir / ONNX_NAME)]) == 0
        local = capsys.readouterr().out.splitlines()[-1]
        assert remote == local and "sha256=" in remote


def test_checkpoint_export_loads_the_vision_tower_of_a_full_model(tmp_path: Path) -> None:
    torch.manual_seed(1)
    config = Qwen2VLConfig(
        text_config={
            "vocab_size": 64,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
        },
        vision_config={
            "depth": 1,
            "embed_dim": 48,
            "num_heads": 3,
            "hidden_size": 32,
            "initializer_range": 0.3,
        },
    )
    full = Qwen2VLForConditionalGeneration(config).eval()
    full.save_pretrained(tmp_path / "checkpoint")
    loaded = exporter.load_checkpoint(tmp_path / "checkpoint")
    pixels, grid = exporter.sample_inputs(((1, 8, 12),))
    with torch.no_grad():
        expected = full.model.visual(pixels, grid).pooler_output
        assert torch.equal(loaded(pixels, grid).pooler_output, expected)
    (tmp_path / "no-weights").mkdir()
    (tmp_path / "checkpoint" / "config.json").rename(tmp_path / "no-weights" / "config.json")
    with pytest.raises(exporter.ExportError, match=r"no 'visual\.\*' tensors"):
        exporter.load_checkpoint(tmp_path / "no-weights")
