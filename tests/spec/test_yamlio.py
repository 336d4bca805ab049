"""YAML loading: 1.2 core scalars, positions, duplicate keys (C6), tabs (C7)."""

from __future__ import annotations

import math

import pytest

from mmaas.core.errors import SpecError
from mmaas.spec.yamlio import format_key_path, load_yaml


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("no", "no"),
        ("yes", "yes"),
        ("on", "on"),
        ("off", "off"),
        ("y", "y"),
        ("n", "n"),
        ("No", "No"),
        ("2024-01-01", "2024-01-01"),
        ("1_000", "1_000"),
        ("0b11", "0b11"),
        ("true", True),
        ("False", False),
        ("TRUE", True),
        ("null", None),
        ("~", None),
        ("", None),
        ("NULL", None),
        ("12", 12),
        ("-3", -3),
        ("+7", 7),
        ("012", 12),
        ("0o17", 15),
        ("0x1F", 31),
        ("1.10", 1.1),
        ("1e3", 1000.0),
        (".5", 0.5),
        ("-.inf", -math.inf),
        ('"no"', "no"),
        ("'true'", "true"),
        ('"12"', "12"),
        ("''", ""),
        ('"null"', "null"),
        ("!!str 12", "12"),
        ("!!str no", "no"),
    ],
)
def test_scalars_resolve_by_yaml_1_2_core(text: str, expected: object) -> None:
    value = load_yaml(f"key: {text}\n", "m.yaml").data["key"]
    assert value == expected and type(value) is type(expected)


def test_nan_is_a_float() -> None:
    assert math.isnan(load_yaml("key: .nan\n", "m.yaml").data["key"])


def test_positions_follow_key_paths() -> None:
    doc = load_yaml("name: a\ninputs:\n  - name: x\n    max: [4, 3, 1280]\n", "m.yaml")
    assert doc.data == {"name": "a", "inputs": [{"name": "x", "max": [4, 3, 1280]}]}
    assert doc.positions[("name",)] == (1, 7)
    assert doc.positions[("inputs",)] == (2, 1)
    assert doc.positions[("inputs", 0)] == (3, 5)
    assert doc.positions[("inputs", 0, "name")] == (3, 11)
    assert doc.positions[("inputs", 0, "max", 2)] == (4, 17)
    assert doc.position(("inputs", 0, "opt")) == (3, 5)  # missing key: its parent


def test_plain_text_keeps_what_was_written() -> None:
    doc = load_yaml("a: ~\nb: 'quoted'\nc: 1.10\n", "m.yaml")
    assert doc.plain_text == {("a",): "~", ("c",): "1.10"}


def test_duplicate_key_cites_both_lines_c6() -> None:
    text = "name: m\ntarget_precision: fp16\nbackend: tensorrt\ntarget_precision: fp32\n"
    with pytest.raises(SpecError) as caught:
        load_yaml(text, "models/m/model.yaml")
    assert [str(p) for p in caught.value.problems] == [
        "models/m/model.yaml:4:1: target_precision: duplicate key 'target_precision': "
        "first at line 2, again at line 4; keep only one"
    ]


def test_every_duplicate_is_reported_nested_too() -> None:
    text = "a: 1\nb:\n  c: 1\n  c: 2\na: 3\n"
    with pytest.raises(SpecError) as caught:
        load_yaml(text, "f.yaml")
    assert [(p.key_path, p.line) for p in caught.value.problems] == [("b.c", 4), ("a", 5)]


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("name: m\nversion: '1'\t# the version\n", 2, 13),  # tab before a trailing comment
        ("name: m\nsource:\n\tpath: m.onnx\n", 3, 1),  # tab indentation
    ],
)
def test_tab_is_one_friendly_line_c7(text: str, line: int, column: int) -> None:
    with pytest.raises(SpecError) as caught:
        load_yaml(text, "models/m/model.yaml")
    [problem] = caught.value.problems
    assert (problem.line, problem.column) == (line, column)
    assert str(problem) == (
        f"models/m/model.yaml:{line}:{column}: invalid YAML: a tab "
        "character; YAML allows only spaces for indentation and (in this "
        "reader) before comments: replace the tab with spaces"
    )
    assert "Traceback" not in str(caught.value) and "\n" not in str(problem)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('name: "m\n', "while scanning a quoted scalar: found unexpected end of stream"),
        ("a: [1, 2\n", "while parsing a flow sequence: expected ',' or ']'"),
        ("a: 1\n---\nb: 2\n", "expected a single document in the stream"),
    ],
)
def test_other_syntax_errors_are_located(text: str, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_yaml(text, "f.yaml")
    [problem] = caught.value.problems
    assert problem.line is not None and problem.column is not None
    assert message in problem.message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: !!binary aGk=\n", "unsupported tag tag:yaml.org,2002:binary"),
        ("a: !!int zz\n", "'zz' is not a valid !!int"),
        ("a: &x [*x]\n", "an alias refers to its own anchor"),
        ("? [a]\n: 1\n", "a key must be plain text"),
        ("a: !!set {x}\n", "unsupported tag tag:yaml.org,2002:set"),
    ],
)
def test_unsupported_constructs_are_problems(text: str, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_yaml(text, "f.yaml")
    assert message in caught.value.problems[0].message


def test_aliases_copy_their_anchor() -> None:
    doc = load_yaml("a: &shape [1, 3]\nb: *shape\n", "f.yaml")
    assert doc.data == {"a": [1, 3], "b": [1, 3]}


def test_empty_text_is_no_document() -> None:
    assert load_yaml("# only a comment\n", "f.yaml").data is None


@pytest.mark.parametrize(
    ("path", "text"),
    [
        (("inputs", 0, "max", 2), "inputs[0].max[2]"),
        (("build", "tensorrt", "version"), "build.tensorrt.version"),
        (
            ("image", "labels", "org.opencontainers.image.title"),
            'image.labels["org.opencontainers.image.title"]',
        ),
        ((), ""),
    ],
)
def test_format_key_path(path: tuple[str | int, ...], text: str) -> None:
    assert format_key_path(path) == text
