"""The SBOM coverage rule (C33): every distribution the interpreter can import is listed
with its exact version, or the check names it."""

from __future__ import annotations

import json

from mmaas.core.sbom import annotate, installed, listed, missing


def test_missing_names_an_absent_or_mismatched_distribution() -> None:
    sbom = {
        "components": [
            {
                "type": "library",
                "name": "onnxruntime",
                "version": "1.32.0",
                "purl": "pkg:pypi/onnxruntime@1.32.0",
            },
            {"type": "library", "name": "mmaas", "version": "0.1.0"},  # local wheel: no purl
            {"type": "library", "name": "Typing_Extensions", "version": "4.16.0"},
        ]
    }
    shipped = {"onnxruntime": "1.32.0", "mmaas": "0.1.0", "typing-extensions": "4.16.0"}
    assert missing(sbom, shipped) == []
    assert missing(sbom, {**shipped, "numpy": "2.4.6"}) == ["numpy==2.4.6"]
    # onnxruntime-gpu is another distribution than onnxruntime (C33)
    assert missing(sbom, {"onnxruntime-gpu": "1.32.0"}) == ["onnxruntime-gpu==1.32.0"]
    assert missing(sbom, {"onnxruntime": "1.31.1"}) == ["onnxruntime==1.31.1"]


def test_annotate_records_the_interpreter_and_the_scope() -> None:
    sbom = annotate({"components": [], "metadata": {}})
    (interpreter,) = sbom["components"]
    assert interpreter["type"] == "platform" and interpreter["name"] == "cpython"
    names = {p["name"] for p in sbom["metadata"]["properties"]}
    assert names == {"mmaas:sbom:scope", "mmaas:sbom:out-of-scope"}
    assert listed(sbom) == {}  # the interpreter is no Python distribution
    json.dumps(sbom)


def test_installed_sees_this_interpreters_distributions() -> None:
    found = installed()
    assert "pytest" in found and "numpy" in found
