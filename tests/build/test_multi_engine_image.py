"""End to end on a real Docker engine: `mmaas build` of a two-engine model (PP-OCR det + cls,
an asset, an ensemble) through the real CLI, then the container serves the pipeline and
both engines equal to in-process ONNX Runtime; tampering with either engine or the asset
makes the container refuse to start and `mmaas verify` fail; a rebuild after one engine's
profile changed recompiles that engine only (the other is an engine-cache hit)."""

from __future__ import annotations

import json
import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as triton

from docker_fixtures import (
    image_manifest,
    run_container,
    run_to_exit,
    tampered_image,
    wait_for_grpc_serving,
)
from mmaas.core import proc
from mmaas_cli import run_mmaas
from ocr_model import model_yaml, write_ocr_model

pytestmark = [pytest.mark.docker, pytest.mark.slow]
MODEL_DIR = "/opt/mmaas/model"


def mmaas(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    """The real CLI in a subprocess, with its engine cache under ``cache``."""
    return run_mmaas(*args, cache=cache)


@dataclass(frozen=True)
class Built:
    """The built image, its `mmaas build --json` report, the model folder, the cache."""

    image: str
    report: dict
    folder: Path
    cache: Path


@pytest.fixture(scope="session")
def ocr_image(
    docker_cli: list[str],
    base_image: str,
    ppocr_models: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Built]:
    """The two-engine image, built cold (a fresh engine cache) through `mmaas build`."""
    root = tmp_path_factory.mktemp("multi-engine")
    folder = write_ocr_model(root / "ocr", ppocr_models)
    tag = secrets.token_hex(4)
    image_section = (
        f"image: {{repository: mmaas-test/ocr, tag: '{tag}', base_image: {base_image}}}\n"
    )
    (folder / "model.yaml").write_text(model_yaml() + image_section)
    cache = root / "cache"
    result = mmaas("build", str(folder), "--json", cache=cache)
    assert result.returncode == 0, result.stderr[-3000:]
    built = Built(f"mmaas-test/ocr:{tag}", json.loads(result.stdout), folder, cache)
    yield built
    proc.run([*docker_cli, "image", "rm", "--force", built.image], check=False)


def test_build_reports_each_engine_the_asset_and_their_labels(
    ocr_image: Built, docker_cli: list[str]
) -> None:
    report = ocr_image.report
    assert report["engine"] is None and report["engine_cache"] == "miss"
    assert {name: e["engine_cache"] for name, e in report["engines"].items()} == {
        "det": "miss",
        "cls": "miss",
    }
    manifest = image_manifest(docker_cli, ocr_image.image)
    assert manifest["schema_version"] == 3
    engines = {e["name"]: e for e in manifest["engines"]}  # type: ignore[attr-defined]
    labels = json.loads(
        proc.run([*docker_cli, "image", "inspect", "--format", "{{json .Config.Labels}}",
                  ocr_image.image]).stdout
    )  # fmt: skip
    assert labels["io.mmaas.engines"] == "det,cls"
    for name in ("det", "cls"):
        engine = engines[name]["manifest"]
        assert labels[f"io.mmaas.engine.{name}.blake3"] == engine["engine"]["blake3"]
        assert (
            labels[f"io.mmaas.engine.{name}.blake3"] == report["engines"][name]["engine"]["blake3"]
        )
        data = ",".join(d["blake3"] for d in engine["engine_data"])
        assert labels[f"io.mmaas.engine.{name}.data.blake3"] == data
    (asset,) = manifest["assets"]  # type: ignore[misc]
    assert labels["io.mmaas.asset.labels.blake3"] == asset["file"]["blake3"]
    assert asset["file"]["path"] == "assets/labels/cls.json"
    verified = mmaas("verify", ocr_image.image, "--json", cache=ocr_image.cache)
    assert verified.returncode == 0, verified.stderr
    assert json.loads(verified.stdout)["engine_set"] == labels["io.mmaas.engine.blake3"]


def test_the_container_serves_the_pipeline_and_both_engines_like_onnxruntime(
    ocr_image: Built, docker_cli: list[str], ppocr_models: dict[str, Path]
) -> None:
    rng = np.random.default_rng(11)
    image = rng.random((1, 3, 96, 128), dtype=np.float32)
    crops = rng.random((2, 3, 48, 192), dtype=np.float32)

    def reference(key: str, array: np.ndarray) -> np.ndarray:
        session = ort.InferenceSession(str(ppocr_models[key]), providers=["CPUExecutionProvider"])
        return np.asarray(session.run(None, {"x": array})[0])

    def tensor(name: str, array: np.ndarray) -> triton.InferInput:
        infer_input = triton.InferInput(name, list(array.shape), "FP32")
        infer_input.set_data_from_numpy(array)
        return infer_input

    with run_container(docker_cli, ocr_image.image, ports=[8001]) as container:
        wait_for_grpc_serving(container.port, timeout=90, container=container)
        client = triton.InferenceServerClient(f"127.0.0.1:{container.port}")
        for name in ("ocr", "ocr-det", "ocr-cls"):
            assert client.is_model_ready(name)
        det = client.infer("ocr-det", [tensor("x", image)]).as_numpy("sigmoid_0.tmp_0")
        cls = client.infer("ocr-cls", [tensor("x", crops)])
        both = client.infer("ocr", [tensor("image", image), tensor("crops", crops)])
        assert "SERVING 'ocr' (version '1' or '1.0.0'), 'ocr-det'" in container.logs()
    want_det, want_cls = reference("ppocr-det", image), reference("ppocr-cls", crops)
    np.testing.assert_allclose(det, want_det, atol=1e-4)
    np.testing.assert_allclose(cls.as_numpy("save_infer_model/scale_0.tmp_1"), want_cls, atol=1e-5)
    np.testing.assert_allclose(both.as_numpy("text_map"), want_det, atol=1e-4)
    np.testing.assert_allclose(both.as_numpy("direction"), want_cls, atol=1e-5)


@pytest.mark.parametrize(
    ("path", "named"),
    [
        ("det/model.ort.onnx", "det/model.ort.onnx: engine does not match its manifest"),
        ("cls/model.ort.onnx", "cls/model.ort.onnx: engine does not match its manifest"),
        ("assets/labels/cls.json", "asset 'labels' does not match its manifest"),
    ],
    ids=["det-engine", "cls-engine", "asset"],
)
def test_tampering_with_either_engine_or_the_asset_refuses_to_start(
    ocr_image: Built, docker_cli: list[str], path: str, named: str
) -> None:
    tag = f"mmaas-test/ocr:tampered-{secrets.token_hex(4)}"
    with tampered_image(docker_cli, ocr_image.image, f"{MODEL_DIR}/{path}", tag) as tampered:
        code, logs = run_to_exit(docker_cli, tampered)
        assert code == 1
        assert named in logs and "Traceback" not in logs
        verified = mmaas("verify", tampered, cache=ocr_image.cache)
        assert verified.returncode == 1 and named in verified.stderr


def test_a_profile_change_in_one_engine_recompiles_only_that_engine(
    ocr_image: Built, docker_cli: list[str]
) -> None:
    text = (ocr_image.folder / "model.yaml").read_text()
    tag = ocr_image.image.split(":")[1]
    changed = text.replace(model_yaml(), model_yaml(cls_opt=2)).replace(tag, f"{tag}-b")
    assert model_yaml(cls_opt=2) in changed
    (ocr_image.folder / "model.yaml").write_text(changed)
    try:
        result = mmaas("build", str(ocr_image.folder), "--json", cache=ocr_image.cache)
    finally:
        (ocr_image.folder / "model.yaml").write_text(text)
        proc.run([*docker_cli, "image", "rm", "--force", f"{ocr_image.image}-b"], check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    engines = report["engines"]
    assert (engines["det"]["engine_cache"], engines["cls"]["engine_cache"]) == ("hit", "miss")
    first = ocr_image.report["engines"]
    assert engines["det"]["engine_key"] == first["det"]["engine_key"]
    assert engines["det"]["engine"] == first["det"]["engine"]
    assert engines["cls"]["engine_key"] != first["cls"]["engine_key"]
    assert report["engine_cache"] == "partial"
    print(f"cold build {ocr_image.report['seconds']} s, one engine changed {report['seconds']} s")
