"""Scaffolding model.yaml from ONNX graphs: real models, odd names and dims, round trips."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from onnx import TensorProto

from mmaas.backends import CompileRequest
from mmaas.build.requests import model_info
from mmaas.build.spec_checks import host_checks
from mmaas.core.errors import SpecError, UsageError
from mmaas.spec.load import load_spec, parse_spec
from mmaas.spec.profile import suggest_profile
from mmaas.spec.scaffold import init_model_folder, scaffold_spec, yaml_scalar
from mmaas.spec.yamlio import load_yaml
from mmaas.stage.build import build_model_dir
from onnx_builder import FLOAT, ORT_SETTINGS, make_onnx, reflect_pad_model

ODD_NAMES = [
    "onnx::Conv_1",
    "input:0",
    "save_infer_model/scale_0.tmp_1",
    "a.b",
    "no",
    "on",
    "null",
    "~",
    "true",
    "1e3",
    "0o17",
    "012",
    "a: b",
    "#x",
    "- x",
    "it's",
    '"q"',
    " padded ",
    "[x]",
    "{x}",
    "*x",
    "&x",
    "!x",
    "x # y",
    "%x",
    "@x",
    "`x",
    "ünï",
    "2024-01-01",
    "",
    "-",
    "?",
    "a,b",
    "tab\there",
    "line\nbreak",
]


@pytest.mark.parametrize("text", ODD_NAMES)
def test_yaml_scalar_reads_back_exactly_under_1_1_and_1_2(text: str) -> None:
    written = yaml_scalar(text)
    assert parse_free(written) == text
    assert yaml.safe_load(f"k: {written}\n") == {"k": text}


def parse_free(written: str) -> object:
    return load_yaml(f"k: {written}\n", "t.yaml").data["k"]


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("x", "x"),
        ("onnx::Conv_1", "onnx::Conv_1"),
        ("a.b/c", "a.b/c"),
        ("no", '"no"'),
        ("1e3", '"1e3"'),
        ("a: b", '"a: b"'),
    ],
)
def test_yaml_scalar_is_plain_when_safe(text: str, written: str) -> None:
    assert yaml_scalar(text) == written


def test_real_models_round_trip(ppocr_models: dict[str, Path], tmp_path: Path) -> None:
    for name, onnx_path in ppocr_models.items():
        text = scaffold_spec(onnx_path, name, source=str(onnx_path))
        loaded = parse_spec(text, tmp_path / name / "model.yaml", checks=host_checks())
        assert loaded.spec.name == name and loaded.spec.max_batch_size == 4
        [x] = loaded.spec.inputs
        assert (x.min, x.opt, x.max) == ((1, 3, 32, 32), (1, 3, 640, 640), (4, 3, 1280, 1280))
        assert "axes [2, 3]: guessed sizes, adjust them" in text


def test_cls_output_name_with_slash(ppocr_models: dict[str, Path]) -> None:
    text = scaffold_spec(ppocr_models["ppocr-cls"], "ppocr-cls")
    assert (
        "  - name: save_infer_model/scale_0.tmp_1\n    datatype: FP32\n    shape: [-1, 2]\n" in text
    )
    assert "  # declared [-1, 3, ?, ?]\n" in text


def test_odd_names_and_dims_round_trip_through_load_spec(tmp_path: Path) -> None:
    names = [name for name in ODD_NAMES if name]  # ONNX allows "", mmaas names need text
    make_onnx(
        tmp_path / "m.onnx", [(name, FLOAT, ["batch _size", -1, 0, None, "?", 3]) for name in names]
    )
    init_model_folder(
        tmp_path, tmp_path / "m.onnx", name="odd", max_batch_size=2, checks=host_checks()
    )
    spec = load_spec(tmp_path / "model.yaml", checks=host_checks()).spec
    assert [t.name for t in spec.inputs] == names
    assert [t.name for t in spec.outputs] == [f"{name}_out" for name in names]
    assert spec.inputs[0].shape == [-1, -1, -1, -1, -1, 3]
    assert (spec.inputs[0].min, spec.inputs[0].max) == (
        (1, 1, 1, 1, 1, 3),
        (2, 512, 512, 512, 512, 3),
    )


def test_static_and_scalar_inputs_get_no_profile_lines(tmp_path: Path) -> None:
    make_onnx(tmp_path / "m.onnx", [("x", FLOAT, [1, 3]), ("scale", TensorProto.INT64, [])])
    text = scaffold_spec(tmp_path / "m.onnx", "static")
    assert "    min:" not in text and "max_batch_size: 0 " in text
    [x, scale] = parse_spec(text, tmp_path / "model.yaml", checks=host_checks()).spec.inputs
    assert (x.min, scale.shape, scale.datatype, scale.max) == ((1, 3), [], "INT64", ())
    # the rank-0 integer input gets sample_values proposed, as a comment (x does not)
    assert text.count("# sample_values: 16000") == 1
    assert text.index("name: scale") < text.index("# sample_values") < text.index("outputs:")


def test_max_batch_size_defaults_to_zero_for_a_fixed_batch(tmp_path: Path) -> None:
    make_onnx(tmp_path / "m.onnx", [("x", FLOAT, [1, "T"])])
    text = scaffold_spec(tmp_path / "m.onnx", "seq")
    assert "max_batch_size: 0 " in text
    [x] = parse_spec(text, tmp_path / "model.yaml", checks=host_checks()).spec.inputs
    assert (x.min, x.opt, x.max) == ((1, 1), (1, 128), (1, 512))


def test_init_writes_relative_source_and_refuses_to_overwrite(tmp_path: Path) -> None:
    onnx_path = make_onnx(tmp_path / "exports" / "m.onnx", [("x", FLOAT, ["N", 4])])
    folder = tmp_path / "models" / "my-model"
    loaded = init_model_folder(folder, onnx_path, checks=host_checks())
    assert loaded.spec.name == "my-model" and loaded.spec.source.path == "../../exports/m.onnx"
    assert load_spec(folder, checks=host_checks()).source_path.resolve() == onnx_path
    with pytest.raises(UsageError, match=r"model\.yaml exists; pass --force"):
        init_model_folder(folder, onnx_path, checks=host_checks())
    assert (
        init_model_folder(
            folder, onnx_path, force=True, max_batch_size=8, checks=host_checks()
        ).spec.max_batch_size
        == 8
    )


def test_init_refuses_a_batch_the_model_cannot_take_and_writes_nothing(tmp_path: Path) -> None:
    onnx_path = make_onnx(tmp_path / "m.onnx", [("x", FLOAT, [1, 3])])
    with pytest.raises(
        SpecError,
        match="axis 0 is fixed at 1 in the ONNX model, so it cannot batch up to max_batch_size 8",
    ):
        init_model_folder(tmp_path / "m", onnx_path, max_batch_size=8, checks=host_checks())
    assert not (tmp_path / "m").exists()


def test_init_needs_a_valid_name(tmp_path: Path) -> None:
    onnx_path = make_onnx(tmp_path / "m.onnx", [("x", FLOAT, [1, 3])])
    with pytest.raises(UsageError, match=r"'My Model' is not a valid model name .* pass --name"):
        init_model_folder(tmp_path / "My Model", onnx_path, checks=host_checks())


def test_init_never_suggests_a_length_a_reflect_pad_forbids(tmp_path: Path) -> None:
    """x [N, 2, L] goes through Relu into a reflect Pad of 3 on L, which
    ONNX Runtime runs only at L >= 4; the generic guess (min 1) would fail the first
    build's profile check: init suggests min 4, says why, and the profile builds."""
    source = reflect_pad_model(tmp_path / "pad.onnx", pad=3)
    assert suggest_profile((-1, 2, -1), 4)[0] == (1, 2, 1)  # what it guessed before
    loaded = init_model_folder(tmp_path / "m", source, checks=host_checks())
    text = (tmp_path / "m" / "model.yaml").read_text()
    assert "# axis 2: at least 4 (a reflect Pad in the graph needs it)" in text
    x = loaded.spec.inputs[0]
    assert (x.min, x.opt, x.max) == ((1, 2, 4), (1, 2, 128), (4, 2, 512))
    out = tmp_path / "engine"
    request = CompileRequest(model_info(loaded.spec), source, out, ORT_SETTINGS)
    build_model_dir(request, "sha256:" + "0" * 64, out)  # runs at min, opt and max
