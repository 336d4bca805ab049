"""inputs[].sample_values in model.yaml: each form completes to the manifest's
SampleValues, and every value the input's datatype cannot hold is refused at load, all at
once, naming the input (mmaas.spec.sample_values)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto

from mmaas.build.requests import model_info
from mmaas.build.spec_checks import host_checks
from mmaas.core.datatypes import BFLOAT16
from mmaas.core.errors import SpecError
from mmaas.core.sample_values import SampleValues
from mmaas.core.samples import sample_inputs
from mmaas.spec.load import load_spec
from onnx_builder import FLOAT, make_onnx

INT64, INT32, BF16 = TensorProto.INT64, TensorProto.INT32, TensorProto.BFLOAT16
HEADER = """\
name: control
version: "1"
source: {path: model.onnx}
inputs:
"""


def folder_with(tmp_path: Path, inputs_yaml: str) -> Path:
    make_onnx(
        tmp_path / "model.onnx",
        [
            ("rate", INT64, [1]),
            ("class_id", INT32, [4]),
            ("length", INT64, [1]),
            ("mask", INT64, [2, 3]),
            ("scale", BF16, [1]),
        ],
    )
    (tmp_path / "model.yaml").write_text(HEADER + inputs_yaml)
    return tmp_path


def test_every_form_completes_and_feeds_the_samples(tmp_path: Path) -> None:
    np.save(tmp_path / "mask.npy", np.array([[1, 1, 0], [1, 0, 0]], np.int64))
    np.save(tmp_path / "scale.npy", np.array([0.5], BFLOAT16))  # numpy writes 2-byte words
    folder = folder_with(
        tmp_path,
        """\
  - {name: rate, sample_values: 16000}
  - {name: class_id, sample_values: [0, 3, 7]}
  - {name: length, sample_values: {min: 2, max: 5}}
  - {name: mask, sample_values: mask.npy}
  - {name: scale, sample_values: scale.npy}
""",
    )
    info = model_info(load_spec(folder, checks=host_checks()).spec)
    values = {tensor.name: tensor.sample_values for tensor in info.inputs}
    assert values["rate"] == SampleValues("constant", (16000,))
    assert values["class_id"] == SampleValues("choices", (0, 3, 7))
    assert values["length"] == SampleValues("range", (2, 5))
    assert values["mask"] == SampleValues("array", (1, 1, 0, 1, 0, 0), (2, 3))
    assert values["scale"] == SampleValues("array", (0.5,), (1,))
    arrays = sample_inputs(info, "opt")
    assert arrays["rate"].tolist() == [16000] and arrays["rate"].dtype == np.int64
    assert set(arrays["class_id"].tolist()) <= {0, 3, 7} and arrays["class_id"].dtype == np.int32
    assert 2 <= int(arrays["length"][0]) <= 5
    assert arrays["mask"].tolist() == [[1, 1, 0], [1, 0, 0]]
    assert arrays["scale"].dtype == BFLOAT16 and arrays["scale"].tolist() == [0.5]


def test_values_that_do_not_fit_are_all_refused_at_once(tmp_path: Path) -> None:
    np.save(tmp_path / "mask.npy", np.array([[0.5, 1, 0], [1, 0, 0]]))
    folder = folder_with(
        tmp_path,
        """\
  - {name: rate, sample_values: "16000"}
  - {name: class_id, sample_values: [1, 1099511627781]}
  - {name: length, sample_values: {min: 9, max: 2}}
  - {name: mask, sample_values: mask.npy}
  - {name: scale, sample_values: ../elsewhere.npy}
""",
    )
    with pytest.raises(SpecError) as caught:
        load_spec(folder, checks=host_checks())
    problems = [str(problem) for problem in caught.value.problems]
    assert len(problems) == 5, problems
    rate, class_id, length, mask, scale = problems
    assert (
        "inputs[0].sample_values: input 'rate': sample_values '16000': text is read as a " in rate
    )
    assert (
        "inputs[1].sample_values: input 'class_id': sample_values: value 1099511627781" in class_id
    )
    assert "does not fit INT32 (-2147483648..2147483647)" in class_id
    assert "input 'length': range min 9 is above max 2" in length
    assert "input 'mask': sample_values: value 0.5 at index [0] does not fit INT64" in mask
    assert "input 'scale': sample_values '../elsewhere.npy' is outside the model folder" in scale


def test_a_file_of_too_many_values_or_without_the_inputs_array_is_refused(tmp_path: Path) -> None:
    np.savez(tmp_path / "many.npz", other=np.zeros(3), more=np.zeros(2))
    np.save(tmp_path / "big.npy", np.zeros(70000, np.int64))
    folder = folder_with(
        tmp_path,
        """\
  - {name: rate, sample_values: many.npz}
  - {name: length, sample_values: big.npy}
""",
    )
    with pytest.raises(SpecError) as caught:
        load_spec(folder, checks=host_checks())
    rate, length = (str(problem) for problem in caught.value.problems)
    assert "holds ['other', 'more'], none named 'rate'" in rate
    assert "holds 70000 values, more than 65536" in length and "checks.accuracy.samples" in length


def test_sample_values_change_the_spec_digest_with_the_files_content(tmp_path: Path) -> None:
    np.save(tmp_path / "mask.npy", np.ones((2, 3), np.int64))
    folder = folder_with(tmp_path, "  - {name: mask, sample_values: mask.npy}\n")
    first = load_spec(folder, checks=host_checks()).spec.digest()
    np.save(tmp_path / "mask.npy", np.zeros((2, 3), np.int64))
    assert load_spec(folder, checks=host_checks()).spec.digest() != first


def test_bytes_inputs_take_text_values(tmp_path: Path) -> None:
    make_onnx(tmp_path / "model.onnx", [("text", TensorProto.STRING, [2]), ("x", FLOAT, [1])])
    (tmp_path / "model.yaml").write_text(
        HEADER
        + '  - {name: text, sample_values: ["hello", "hi"]}\n  - {name: x, sample_values: [1]}\n'
    )
    info = model_info(load_spec(tmp_path, checks=host_checks()).spec)
    assert set(sample_inputs(info, "opt")["text"].tolist()) <= {b"hello", b"hi"}
