"""The back-end registry: one literal dict naming each back end's runtime, compiler and
build target; the spec's ``backend:`` names the same back ends; every part loads (no
TensorRT library needed) and has what its protocol promises."""

from __future__ import annotations

from typing import get_args

import pytest

from mmaas.backends import BACKENDS, BackendName, get_compiler, get_runtime, get_target
from mmaas.build.spec_checks import host_checks
from mmaas.build.wheel import installed_root
from mmaas.core.errors import UsageError
from mmaas.spec.load import load_spec
from paths import ROOT


def test_the_spec_and_the_registry_name_the_same_back_ends() -> None:
    assert get_args(BackendName) == tuple(BACKENDS)


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_every_part_loads_and_keeps_its_protocol(name: str) -> None:
    runtime, compiler, target = get_runtime(name), get_compiler(name), get_target(name)
    assert runtime.name == compiler.name == target.name == name
    assert runtime.device_kind in ("CPU", "GPU") and runtime.platform
    assert compiler.runtime.name == name
    spec = load_spec(ROOT / "models" / "ppocr-det", checks=host_checks()).spec.model_copy(
        update={"backend": name}
    )
    recipe = target.recipe(spec)
    assert recipe.template == f"Dockerfile.{name}.j2" and target.precisions
    assert "server" in recipe.runtime_extras and recipe.builder_extras
    for package in (*target.runtime_packages, *target.builder_packages):
        assert installed_root().joinpath(*package.split(".")[1:], "__init__.py").is_file()
    assert "mmaas.server" in target.runtime_packages
    assert "mmaas.stage" in target.builder_packages
    assert not any(p.startswith(("mmaas.cli", "mmaas.spec", "mmaas.build")) for p in (
        *target.runtime_packages, *target.builder_packages))  # fmt: skip


def test_an_unknown_back_end_lists_the_known_ones() -> None:
    with pytest.raises(UsageError, match="unknown backend 'tflite'; known: onnxruntime, tensorrt"):
        get_runtime("tflite")
