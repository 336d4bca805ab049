"""load_spec: one fixture folder per behaviour under tests/fixtures/specs/<case>/.

Each case's ONNX model is built at test time (tests/onnx_builder.py) into a copy of the
folder. A folder with ``expected.txt`` is an error case: the file lists every problem
exactly as the user sees it (``model.yaml:line:col: key.path: message``, the folder's path
removed). The other folders load, and their completed spec is asserted here.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from onnx import TensorProto

from mmaas.build.spec_checks import host_checks
from mmaas.core.errors import SpecError, UsageError
from mmaas.core.hashing import file_digests
from mmaas.spec.load import LoadedSpec, load_spec, parse_spec
from onnx_builder import FLOAT, IMAGE_MODEL, Tensor, make_onnx
from paths import FIXTURES

FIXTURES = FIXTURES / "specs"
INT64 = TensorProto.INT64


def _graph(inputs: list[Tensor], outputs: list[Tensor] | None = None) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        make_onnx(path, inputs, outputs)

    return write


def _garbage(path: Path) -> None:
    path.write_text("this is not an ONNX model\n")


SPEECH = _graph([("x", FLOAT, [1, 80, "T"]), ("length", INT64, [1])])
GRAPHS: dict[str, Callable[[Path], None]] = {
    "c5_norway": _graph([(name, FLOAT, [1, 2]) for name in ("no", "on", "null")]),
    "c5_norway_ok": _graph([(name, FLOAT, [1, 2]) for name in ("no", "on", "null")]),
    "not_onnx": _garbage,
    "c2_rank_mismatch": SPEECH,
    "c2_bad_values": SPEECH,
    "c2_mixed_syntax": SPEECH,
    "c3_fixed_batch": _graph([("x", FLOAT, [1, 3, 224, 224])]),
    "c1_trtexec_names": _graph(
        [("it's", FLOAT, [1, 2]), ("a,b", FLOAT, [1, 2]), ("onnx::Conv_1", FLOAT, [1, 2])]
    ),
    "c1_unquotable_onnxruntime": _graph([("it's", FLOAT, [1, 2]), ("a,b", FLOAT, [1, 2])]),
    "c1_colon_names": _graph(
        [("onnx::Conv_1", FLOAT, [1, 3, 224, 224]), ("input:0", INT64, [1, 10])],
        [("logits/Softmax:0", FLOAT, [1, 1000])],
    ),
    "scalar_batch": _graph(
        [("x", FLOAT, ["N", 3]), ("scale", FLOAT, [])], [("y", FLOAT, ["N", 3])]
    ),
    "output_fixed_batch": _graph([("x", FLOAT, ["N", 3])], [("y", FLOAT, [1, 10])]),
    "shapeless_input": _graph([("x", FLOAT, None)], [("y", FLOAT, [2])]),
    "c4_odd_dims": _graph(
        [("image", FLOAT, ["batch _size", 3, None, 0]), ("mask", INT64, ["bs", -1])],
        [("boxes", FLOAT, ["B", "num boxes", 4])],
    ),
    "static_completed": _graph([("x", FLOAT, [1, 3, 8, 8])], [("y", FLOAT, [1, 10])]),
    "outputs_subset": _graph(
        [("x", FLOAT, [1, 3])], [("boxes", FLOAT, [1, 4]), ("scores", FLOAT, [1])]
    ),
}
ERROR_CASES = sorted(path.parent.name for path in FIXTURES.glob("*/expected.txt"))


def _copy_case(case: str, tmp_path: Path) -> Path:
    folder = tmp_path / case
    shutil.copytree(FIXTURES / case, folder)
    GRAPHS.get(case, _graph(IMAGE_MODEL))(folder / "model.onnx")
    return folder


def load_case(case: str, tmp_path: Path) -> LoadedSpec:
    """Load fixture ``case`` with its ONNX model built beside it."""
    return load_spec(_copy_case(case, tmp_path) / "model.yaml", checks=host_checks())


def problems_of(case: str, tmp_path: Path) -> list[str]:
    """Every problem of fixture ``case`` as printed, its folder's path and the generated
    model's sha256 replaced by stable text."""
    folder = _copy_case(case, tmp_path)
    onnx_file = folder / "model.onnx"
    digest = file_digests(onnx_file)["sha256"].split(":")[1] if onnx_file.is_file() else "-"
    with pytest.raises(SpecError) as caught:
        load_spec(folder / "model.yaml", checks=host_checks())
    return [
        str(problem).replace(f"{folder}/", "").replace(digest, "<sha256 of model.onnx>")
        for problem in caught.value.problems
    ]


@pytest.mark.parametrize("case", ERROR_CASES)
def test_error_case(case: str, tmp_path: Path) -> None:
    expected = (FIXTURES / case / "expected.txt").read_text().splitlines()
    assert problems_of(case, tmp_path) == expected


def test_every_fixture_is_used() -> None:
    cases = {path.name for path in FIXTURES.iterdir()}
    assert set(GRAPHS) <= cases
    assert len(ERROR_CASES) >= 30


def test_c1_colon_names_kept_exactly(tmp_path: Path) -> None:
    spec = load_case("c1_colon_names", tmp_path).spec
    assert [(t.name, t.datatype, t.shape, t.min, t.max) for t in spec.inputs] == [
        ("onnx::Conv_1", "FP32", [1, 3, 224, 224], (1, 3, 224, 224), (1, 3, 224, 224)),
        ("input:0", "INT64", [1, 10], (1, 10), (1, 10)),
    ]
    assert [t.name for t in spec.outputs] == ["logits/Softmax:0"]


def test_c1_quote_and_comma_are_fine_for_onnxruntime(tmp_path: Path) -> None:
    spec = load_case("c1_unquotable_onnxruntime", tmp_path).spec
    assert [t.name for t in spec.inputs] == ["it's", "a,b"]


def test_c2_mixed_shape_syntax_is_normalised(tmp_path: Path) -> None:
    spec = load_case("c2_mixed_syntax", tmp_path).spec
    x, length = spec.inputs
    assert (x.shape, x.min, x.opt, x.max) == (
        [1, 80, -1],
        (1, 80, 1),
        (1, 80, 1000),
        (1, 80, 10000),
    )
    assert (length.datatype, length.min, length.opt, length.max) == ("INT64", (1,), (1,), (1,))


def test_c4_profiles_match_by_input_and_axis_not_dim_name(tmp_path: Path) -> None:
    spec = load_case("c4_odd_dims", tmp_path).spec
    image, mask = spec.inputs
    assert (image.shape, image.max) == ([-1, 3, -1, -1], (4, 3, 64, 64))
    assert (mask.shape, mask.opt) == ([-1, -1], (2, 8))
    assert spec.outputs[0].shape == [-1, -1, 4]


def test_c5_quoted_names_and_yaml_1_2_words(tmp_path: Path) -> None:
    spec = load_case("c5_norway_ok", tmp_path).spec
    assert [t.name for t in spec.inputs] == ["no", "on", "null"]
    assert spec.image.tag == "no" and spec.build.timing_cache is False


def test_static_inputs_and_outputs_are_completed(tmp_path: Path) -> None:
    loaded = load_case("static_completed", tmp_path)
    [x] = loaded.spec.inputs
    assert (x.datatype, x.shape, x.min, x.opt, x.max) == (
        "FP32",
        [1, 3, 8, 8],
        (1, 3, 8, 8),
        (1, 3, 8, 8),
        (1, 3, 8, 8),
    )
    assert [(t.name, t.datatype, t.shape) for t in loaded.spec.outputs] == [("y", "FP32", [1, 10])]
    assert loaded.source_path == loaded.model_dir / "model.onnx"
    assert loaded.positions[("source",)] == (3, 1)


def test_max_batch_size_zero_means_plain_full_shapes(tmp_path: Path) -> None:
    [x] = load_case("mbs_zero_dynamic", tmp_path).spec.inputs
    assert (x.min, x.max) == ((1, 3, 32, 32), (16, 3, 128, 128))


def test_spec_shape_may_fix_a_dynamic_axis(tmp_path: Path) -> None:
    [x] = load_case("spec_shape_fixes_axis", tmp_path).spec.inputs
    assert x.shape == [-1, 3, 48, -1]


def test_listed_outputs_are_the_served_subset(tmp_path: Path) -> None:
    spec = load_case("outputs_subset", tmp_path).spec
    assert [(t.name, t.shape) for t in spec.outputs] == [("scores", [1])]


@pytest.mark.parametrize("name", ["ppocr-det", "ppocr-rec", "ppocr-cls"])
def test_example_models_load_and_match_their_pins(ppocr_models: dict[str, Path], name: str) -> None:
    loaded = load_spec(
        ppocr_models[name].parent, checks=host_checks()
    )  # a folder stands for its model.yaml
    assert loaded.path == ppocr_models[name].parent / "model.yaml"
    assert loaded.source_path == ppocr_models[name]
    assert loaded.spec.name == name and loaded.spec.version == "1.0.0"
    assert loaded.spec.inputs[0].max[0] == loaded.spec.max_batch_size


def test_missing_spec_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read the model spec"):
        load_spec(tmp_path / "model.yaml", checks=host_checks())


def test_non_utf8_spec(tmp_path: Path) -> None:
    path = tmp_path / "model.yaml"
    path.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(SpecError, match=r"model.yaml: not UTF-8 text .* save the file as UTF-8"):
        load_spec(path, checks=host_checks())


def test_parse_spec_checks_text_for_a_future_path(tmp_path: Path) -> None:
    make_onnx(tmp_path / "m.onnx", [("x", FLOAT, [1, 2])])
    loaded = parse_spec(
        'name: m\nversion: "1"\nsource: {path: m.onnx}\n',
        tmp_path / "model.yaml",
        checks=host_checks(),
    )
    assert loaded.spec.inputs[0].min == (1, 2) and not (tmp_path / "model.yaml").exists()


def test_engines_complete_each_against_its_graph_with_assets_and_a_pipeline(
    tmp_path: Path,
) -> None:
    """A multi-engine model: each engine completed as its own single-engine view (named
    as it is served), the assets resolved, the ensemble's signature derived."""
    loaded = load_case("engines_ok", tmp_path)
    det, cls = loaded.engines
    assert (det.name, det.spec.name, cls.spec.name) == ("det", "ocr-det", "ocr-cls")
    assert det.spec.engines is None and det.spec.pipeline is None and det.spec.assets == {}
    assert det.spec.image_repository == "mmaas/ocr"  # the model's image, not ocr-det's
    assert (det.spec.max_batch_size, cls.spec.max_batch_size) == (4, 2)
    assert cls.spec.inputs[0].max == (2, 3, 256, 256)
    assert loaded.spec.engines is not None
    assert loaded.spec.engines["cls"].outputs[0].name == "x_out"  # completed in the spec too
    assert loaded.engine_folder("det") == "det"
    assert loaded.assets == {"vocab": loaded.model_dir / "vocab.txt"}
    pipeline = loaded.pipeline
    assert pipeline is not None and pipeline.serve_engines == ("det", "cls")
    (image,) = pipeline.model.inputs  # fed to both: the profiles intersect
    assert (image.name, image.min, image.max) == ("image", (1, 3, 32, 32), (2, 3, 128, 128))
    assert [t.name for t in pipeline.model.outputs] == ["mask", "label"]
    assert (pipeline.model.name, pipeline.model.backend, pipeline.model.max_batch_size) == (
        "ocr",
        "ensemble",
        2,
    )


def test_one_engine_under_engines_is_served_under_the_model_name(tmp_path: Path) -> None:
    folder = _copy_case("engines_ok", tmp_path)
    text = (folder / "model.yaml").read_text()
    single = text[: text.index("  cls:")] + "assets: {}\n"
    (folder / "model.yaml").write_text(single)
    loaded = load_spec(folder / "model.yaml", checks=host_checks())
    (det,) = loaded.engines
    assert det.spec.name == "ocr" and loaded.engine_folder("det") == "."
