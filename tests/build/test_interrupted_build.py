"""An interrupted build leaves no tagged intermediate image (the real Docker engine): the
package build runs under a throw-away tag that is removed whatever happens, so the
image's own tag only ever names a labelled, verified image. The interruption is a
KeyboardInterrupt (what Ctrl-C raises) right after the package build and right after the
compile build."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
import yaml

from export_models import model_copy
from mmaas.build import compile as compile_module
from mmaas.build import pipeline
from mmaas.build.cache.reuse import CacheOptions
from mmaas.build.pipeline import build_image
from mmaas.core import proc

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def tags(docker_cli: list[str], repository: str) -> list[str]:
    argv = [*docker_cli, "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", repository]
    return [line for line in proc.run(argv).stdout.splitlines() if line.strip()]


@pytest.fixture
def folder(tmp_path: Path, ppocr_models: dict[str, Path], base_image) -> Path:
    repository = f"mmaas-test/interrupted-{secrets.token_hex(4)}"
    return model_copy(tmp_path, ppocr_models["ppocr-cls"], {"image": {"repository": repository}})


def interrupt(*args, **kwargs):
    raise KeyboardInterrupt


def repository_of(folder: Path) -> str:
    return yaml.safe_load((folder / "model.yaml").read_text())["image"]["repository"]


def test_interrupted_after_the_package_build(folder, docker_cli, monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(pipeline, "verify_model_dir", interrupt)
    with pytest.raises(KeyboardInterrupt):
        build_image(folder, cache=CacheOptions(root=tmp_path / "cache"))
    assert tags(docker_cli, repository_of(folder)) == []


def test_interrupted_after_the_compile_build(folder, docker_cli, monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(compile_module, "verify_engine_dir", interrupt)
    with pytest.raises(KeyboardInterrupt):
        build_image(folder, cache=CacheOptions(root=tmp_path / "cache"))
    assert tags(docker_cli, repository_of(folder)) == []
