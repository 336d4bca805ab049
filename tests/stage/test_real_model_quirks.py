"""Two real models whose quirks the build must name (scripts/fetch_models.py TEST_MODELS),
each from ``mmaas init``'s model.yaml through ``mmaas serve``'s compile (the builder stage
on this host: :func:`mmaas.build.local.compile_local`):

* ddddocr's ``common.onnx`` declares its output ``387`` as ``[1, seqlen]`` but returns
  ``[T, 1, 8210]``: the profile check warns with both shapes and the fix; model.yaml may
  then state the real shape, which the run must fit and which metadata, ModelConfig and
  the Triton export advertise;
* silero-vad's rank-0 INT64 ``sr`` must be 8000 or 16000: ``mmaas init`` proposes
  ``sample_values`` for it, the profile check's failure names it, and with it the build
  passes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from export_models import source_of
from mmaas.build.local import compile_local
from mmaas.build.spec_checks import host_checks
from mmaas.core.errors import BuildError
from mmaas.core.manifest import read_manifest
from mmaas.export.triton import model_config
from mmaas.server.metrics import ModelMetrics
from mmaas.server.protocol.messages import to_metadata, to_model_config
from mmaas.server.repository import ConfigFacts, ServedModel
from mmaas.spec.scaffold import init_model_folder

pytestmark = pytest.mark.slow
REAL = [-1, 1, 8210]  # ddddocr's output 387 as it runs: [T, 1, 8210], T from the width


def initialised(tmp_path: Path, onnx: Path, name: str) -> Path:
    """A model folder with the ONNX hard-linked in and the model.yaml ``mmaas init``
    writes for it."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / onnx.name).hardlink_to(onnx)
    init_model_folder(folder, folder / onnx.name, checks=host_checks())
    return folder


def edit(folder: Path, change) -> None:
    spec = yaml.safe_load((folder / "model.yaml").read_text())
    change(spec)
    (folder / "model.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))


def served(folder: Path) -> ServedModel:
    manifest = read_manifest(folder / ".mmaas" / "engine")
    facts = ConfigFacts("onnxruntime_onnx", "CPU", 1, batching=False)
    info = manifest.model
    return ServedModel(info, 0, ModelMetrics(info.name, info.version), facts)


def test_a_misdeclared_output_is_warned_and_its_stated_shape_is_served(
    tmp_path: Path, test_models: dict[str, Path]
) -> None:
    folder = initialised(tmp_path, test_models["ddddocr"], "ddddocr")
    compile_local(folder)
    report = read_manifest(folder / ".mmaas" / "engine").report
    (warning,) = report["warnings"]
    assert "returned [4, 1, 8210] at min, [80, 1, 8210] at opt, [160, 1, 8210] at max" in warning
    assert "the ONNX graph declares [1, -1]" in warning
    assert f"outputs: [{{name: '387', shape: {REAL}}}]" in warning
    assert served(folder).info.outputs[0].shape == (1, -1)

    edit(folder, lambda spec: spec["outputs"][0].update(shape=REAL))
    compile_local(folder)  # the stated shape: validated, and the run fits it
    assert read_manifest(folder / ".mmaas" / "engine").report["warnings"] == []
    model = served(folder)
    assert list(to_metadata(model).outputs[0].shape) == REAL
    assert list(to_model_config(model).output[0].dims) == REAL
    assert list(model_config(source_of(folder)).output[0].dims) == REAL

    edit(folder, lambda spec: spec["outputs"][0].update(shape=[-1, 2, 8210]))
    with pytest.raises(BuildError) as failed:
        compile_local(folder)
    assert "does not fit the shape model.yaml states, [-1, 2, 8210]" in failed.value.message
    assert f"({REAL}" in (failed.value.hint or "")


def test_a_scalar_whose_value_matters_is_named_with_sample_values(
    tmp_path: Path, test_models: dict[str, Path]
) -> None:
    folder = initialised(tmp_path, test_models["silero-vad"], "silero-vad")
    text = (folder / "model.yaml").read_text()
    assert "    # sample_values: 16000\n" in text  # init proposes it for sr, as a comment

    def profile(spec: dict) -> None:  # the model's real window: 512 samples at 16 kHz
        audio, state, _ = spec["inputs"]
        audio.update(shape=[1, 512], min=[1, 512], opt=[1, 512], max=[1, 512])
        state.update(shape=[2, 1, 128], min=[2, 1, 128], opt=[2, 1, 128], max=[2, 1, 128])

    edit(folder, profile)
    with pytest.raises(BuildError) as failed:
        compile_local(folder)
    hint = failed.value.hint or ""
    assert "sample_values" in hint and "inputs: [{name: 'sr', sample_values: 16000}]" in hint
    assert "integers 0..7 for 'sr'" in hint

    edit(folder, lambda spec: spec["inputs"][2].update(sample_values=16000))
    compile_local(folder)
    checked = read_manifest(folder / ".mmaas" / "engine").report["profile_check"]
    assert [point["outputs"]["output"] for point in checked] == [[1, 1]] * 3
