"""Triton model repositories Triton loads: real models compiled by the builder stage (on
this host, as ``mmaas serve`` does), written as a Triton repository, every config parsed
with Triton's own protobuf and checked with Triton's rules over the graph shipped beside
it (tests/export/triton_oracle.py), and the shipped graph run by ONNX Runtime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import yaml
from triton_oracle import parse, problems
from tritonclient.grpc import model_config_pb2 as triton

from mmaas.build.local import compile_local
from mmaas.build.spec_checks import host_checks
from mmaas.core.hashing import file_digests
from mmaas.core.model_dir import verify_model_dir
from mmaas.export.source import ExportSource
from mmaas.export.triton import write_triton
from mmaas.spec.scaffold import init_model_folder

pytestmark = pytest.mark.slow
REFERENCE = "127.0.0.1:5000/mmaas/m@sha256:" + "ab" * 32


def model_folder(tmp_path: Path, onnx: Path, name: str, change=None) -> Path:
    """``mmaas init``'s model folder for ``onnx`` (hard-linked in), model.yaml changed by
    ``change``."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / onnx.name).hardlink_to(onnx)
    init_model_folder(folder, folder / onnx.name, checks=host_checks())
    if change:
        spec = yaml.safe_load((folder / "model.yaml").read_text())
        change(spec)
        (folder / "model.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return folder


def exported(folder: Path, repository: Path, device=None) -> tuple[Path, list[str]]:
    """Compile ``folder``, write it into ``repository``; its Triton folder and what the
    export said."""
    loaded, engine_dir = compile_local(folder)
    checked = verify_model_dir(engine_dir)
    source = ExportSource(
        loaded.spec,
        folder,
        REFERENCE,
        REFERENCE,
        True,
        checked.engines[0].manifest,
        {},
        checked,
        loaded.source_path,
    )
    said: list[str] = []
    done = write_triton(source, engine_dir, repository, 1, said.append, device)
    return done.model_dir, said


def ddddocr_fixed_batch(spec: dict) -> None:
    """ddddocr with max_batch_size 1 over its batch fixed at 1, its real output stated."""
    spec["max_batch_size"] = 1
    spec["outputs"][0]["shape"] = [-1, 1, 8210]


def silero_window(spec: dict) -> None:
    audio, state, sr = spec["inputs"]
    audio.update(shape=[1, 512], min=[1, 512], opt=[1, 512], max=[1, 512])
    state.update(shape=[2, 1, 128], min=[2, 1, 128], opt=[2, 1, 128], max=[2, 1, 128])
    sr["sample_values"] = 16000


def test_a_batchable_model_keeps_its_batch_on_cpu_and_ships_the_source_for_a_gpu(
    tmp_path: Path, ppocr_models: dict[str, Path]
) -> None:
    folder = model_folder(tmp_path, ppocr_models["ppocr-cls"], "cls")
    model, _ = exported(folder, tmp_path / "cpu")
    config = parse(model / "config.pbtxt")
    assert config.max_batch_size == 4 and list(config.input[0].dims) == [3, -1, -1]
    assert config.instance_group[0].kind == triton.ModelInstanceGroup.KIND_CPU
    assert problems(config, model / "1" / "model.onnx") == []
    assert config.parameters["mmaas.graph"].string_value == "engine"

    model, _ = exported(folder, tmp_path / "gpu", "gpu")
    config = parse(model / "config.pbtxt")
    assert config.instance_group[0].kind == triton.ModelInstanceGroup.KIND_GPU
    assert not config.optimization.graph.level  # Triton's ONNX Runtime optimizes at load
    shipped = file_digests(model / "1" / "model.onnx")["sha256"]
    assert shipped == file_digests(ppocr_models["ppocr-cls"])["sha256"]  # the source, as is
    assert config.parameters["mmaas.graph"].string_value == "source"
    assert problems(config, model / "1" / "model.onnx") == []


def test_a_fixed_batch_is_exported_without_batching_and_the_real_output_rank(
    tmp_path: Path, test_models: dict[str, Path]
) -> None:
    folder = model_folder(tmp_path, test_models["ddddocr"], "ddddocr", ddddocr_fixed_batch)
    model, said = exported(folder, tmp_path / "repository")
    config = parse(model / "config.pbtxt")
    assert config.max_batch_size == 0 and not config.HasField("dynamic_batching")
    assert list(config.input[0].dims) == [1, 1, 64, -1]
    assert list(config.output[0].dims) == [-1, 1, 8210]
    assert any("max_batch_size 0 and full shapes" in line for line in said)
    graph = model / "1" / "model.onnx"
    assert problems(config, graph) == []
    # the oracle fails the old export (batch axis kept) and the graph as ddddocr ships it
    old = parse(model / "config.pbtxt")
    old.max_batch_size = 1
    del old.input[0].dims[0]
    assert any("graph's axis 0 is 1" in p for p in problems(old, graph))
    assert any("(rank)" in p for p in problems(config, test_models["ddddocr"]))
    session = ort.InferenceSession(str(graph), providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {"input1": np.zeros((1, 1, 64, 96), np.float32)})
    assert out.shape == (12, 1, 8210)
    assert session.get_outputs()[0].shape[1:] == [1, 8210]  # declared as served now


def test_a_scalar_input_is_dims_1_with_an_empty_reshape(
    tmp_path: Path, test_models: dict[str, Path]
) -> None:
    folder = model_folder(tmp_path, test_models["silero-vad"], "vad", silero_window)
    model, _ = exported(folder, tmp_path / "repository")
    config = parse(model / "config.pbtxt")
    sr = next(t for t in config.input if t.name == "sr")
    assert list(sr.dims) == [1] and sr.HasField("reshape") and list(sr.reshape.shape) == []
    assert problems(config, model / "1" / "model.onnx") == []
    sr.ClearField("reshape")
    sr.ClearField("dims")  # the old export: dims [], which Triton refuses
    assert any("no dims" in p for p in problems(config, model / "1" / "model.onnx"))
    sr.dims.append(2)
    assert any("scalar in the graph" in p for p in problems(config, model / "1" / "model.onnx"))
