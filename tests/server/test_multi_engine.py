"""A multi-engine model directory (PP-OCR det + cls, an asset, an ensemble), compiled and
stamped on this host as ``mmaas serve`` does (:func:`mmaas.build.local.compile_local`),
served by the real server (subprocess) and answered with the real client: every model of
the repository equal to in-process ONNX Runtime on the source files; the server refuses
a damaged engine or asset, and ``MMAAS_EXPECTED_ENGINE`` pins the engine set."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as triton
from tritonclient.utils import InferenceServerException

from mmaas.build.local import compile_local
from mmaas.core.model_manifest import engine_set_digest, read_model_manifest
from ocr_model import write_ocr_model

from .conftest import RunningServer
from .test_app import refused

DET_OUT, CLS_OUT = "sigmoid_0.tmp_0", "save_infer_model/scale_0.tmp_1"


@pytest.fixture(scope="module")
def ocr_dir(ppocr_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = write_ocr_model(tmp_path_factory.mktemp("ocr") / "ocr", ppocr_models)
    _, model_dir = compile_local(folder)
    return model_dir


@pytest.fixture(scope="module")
def ocr(module_server: Callable[..., RunningServer], ocr_dir: Path) -> RunningServer:
    return module_server(ocr_dir)


def tensor(name: str, array: np.ndarray) -> triton.InferInput:
    infer_input = triton.InferInput(name, list(array.shape), "FP32")
    infer_input.set_data_from_numpy(array)
    return infer_input


def reference(source: Path, array: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, {"x": array})[0])


def test_model_directory_holds_one_folder_per_engine_and_the_asset(ocr_dir: Path) -> None:
    manifest = read_model_manifest(ocr_dir)
    assert manifest.schema_version == 3
    assert [(e.name, e.directory, e.manifest.model.name) for e in manifest.engines] == [
        ("det", "det", "ocr-det"),
        ("cls", "cls", "ocr-cls"),
    ]
    assert (ocr_dir / "det" / "model.ort.onnx").is_file()
    (asset,) = manifest.assets
    assert (asset.name, asset.file.path) == ("labels", "assets/labels/cls.json")
    assert manifest.pipeline is not None and manifest.pipeline.kind == "ensemble"


def test_the_repository_serves_the_pipeline_and_each_engine(
    ocr: RunningServer, ppocr_models: dict[str, Path]
) -> None:
    client = ocr.client()
    assert client.is_server_ready()
    for name in ("ocr", "ocr-det", "ocr-cls"):
        assert client.is_model_ready(name, "1.0.0")
    assert client.get_model_config("ocr").config.platform == "ensemble"
    assert client.get_model_config("ocr-cls").config.platform == "onnxruntime_onnx"
    meta = client.get_model_metadata("ocr")
    assert [(t.name, list(t.shape)) for t in meta.inputs] == [
        ("image", [-1, 3, -1, -1]),
        ("crops", [-1, 3, 48, 192]),
    ]
    rng = np.random.default_rng(3)
    image = rng.random((1, 3, 64, 96), dtype=np.float32)
    crops = rng.random((3, 3, 48, 192), dtype=np.float32)
    want_det = reference(ppocr_models["ppocr-det"], image)
    want_cls = reference(ppocr_models["ppocr-cls"], crops)
    det = client.infer("ocr-det", [tensor("x", image)]).as_numpy(DET_OUT)
    cls = client.infer("ocr-cls", [tensor("x", crops)]).as_numpy(CLS_OUT)
    both = client.infer("ocr", [tensor("image", image), tensor("crops", crops)])
    np.testing.assert_allclose(det, want_det, atol=1e-4)
    np.testing.assert_allclose(cls, want_cls, atol=1e-5)
    np.testing.assert_allclose(both.as_numpy("text_map"), want_det, atol=1e-4)
    np.testing.assert_allclose(both.as_numpy("direction"), want_cls, atol=1e-5)


def test_a_pipeline_runs_only_the_steps_its_outputs_need(ocr: RunningServer) -> None:
    client = ocr.client()

    def runs(name: str) -> int:
        return int(client.get_inference_statistics(name).model_stats[0].execution_count)

    det_before, cls_before = runs("ocr-det"), runs("ocr-cls")
    image = np.zeros((1, 3, 32, 32), np.float32)
    crops = np.zeros((1, 3, 48, 192), np.float32)
    direction = triton.InferRequestedOutput("direction")
    client.infer("ocr", [tensor("image", image), tensor("crops", crops)], outputs=[direction])
    assert (runs("ocr-det"), runs("ocr-cls")) == (det_before, cls_before + 1)
    with pytest.raises(InferenceServerException) as error:
        client.infer("ocr", [tensor("image", image)])
    assert error.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert "missing input 'crops'" in error.value.message()


@pytest.fixture
def ocr_copy(ocr_dir: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(ocr_dir, tmp_path / "model"))


@pytest.mark.parametrize(
    ("damaged", "named"),
    [
        ("det/model.ort.onnx", "det/model.ort.onnx: engine does not match"),
        ("cls/model.ort.onnx.data", "cls/model.ort.onnx.data: engine data does not match"),
        ("assets/labels/cls.json", "asset 'labels' does not match"),
    ],
)
def test_a_damaged_engine_or_asset_makes_the_server_refuse_to_start(
    start_server: Callable[..., RunningServer], ocr_copy: Path, damaged: str, named: str
) -> None:
    with (ocr_copy / damaged).open("ab") as stream:
        stream.write(b"x")
    assert named in refused(start_server(ocr_copy, wait=False))


def test_expected_engine_pins_the_engine_set(
    start_server: Callable[..., RunningServer], ocr_copy: Path
) -> None:
    pin = engine_set_digest(read_model_manifest(ocr_copy))
    single = read_model_manifest(ocr_copy).engines[0].manifest.engine.blake3
    line = refused(start_server(ocr_copy, wait=False, MMAAS_EXPECTED_ENGINE=single))
    assert f"the engine set (2 engines) is {pin}, but MMAAS_EXPECTED_ENGINE pins" in line
    assert start_server(ocr_copy, MMAAS_EXPECTED_ENGINE=pin).client().is_model_ready("ocr")
