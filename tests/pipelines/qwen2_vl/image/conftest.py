"""Fixtures of the qwen-vl image tests: the image `mmaas build` makes of a copy of
models/qwen-vl from a clean state (a fresh engine cache, a new tag) and one container
serving it, each made once for the whole package (CI budget) and removed after it."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from docker_fixtures import Container, run_container, wait_for_grpc_serving
from mmaas.core import proc

KEY = "sk-image-test"
FILES = ("model.yaml", "qwen2_vl_vision.onnx", "qwen2_vl_language.onnx", "runtime.json",
         "tokenizer.json", "embed_tokens.npy", "language_gate.npz")  # fmt: skip


@contextmanager
def built_copy(
    docker_cli: list[str], base_image: str, export: Path, root: Path, repository: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    """`mmaas build --json` of a copy of the converter's files in ``export`` under
    ``root``, tagged ``repository:<random>``, with a fresh engine cache: the image and the
    build's JSON report; the image removed afterwards."""
    folder = root / repository.rsplit("/", 1)[-1]
    folder.mkdir()
    for name in FILES:
        shutil.copy(export / name, folder / name)
    tag = secrets.token_hex(4)
    with (folder / "model.yaml").open("a") as spec:
        spec.write(f"image: {{repository: {repository}, tag: '{tag}', "
                   f"base_image: {base_image}}}\n")  # fmt: skip
    result = subprocess.run(
        [str(Path(sys.executable).parent / "mmaas"), "build", str(folder), "--json"],
        capture_output=True, text=True, check=False,
        env={**os.environ, "MMAAS_CACHE_DIR": str(root / "cache")},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    image = f"{repository}:{tag}"
    try:
        yield image, json.loads(result.stdout)
    finally:
        proc.run([*docker_cli, "image", "rm", "--force", image], check=False)


@pytest.fixture(scope="package")
def built(
    docker_cli: list[str], base_image: str, qwen_vl_export: Path, tmp_path_factory
) -> Iterator[str]:
    """The image `mmaas build` makes of a copy of models/qwen-vl, with a fresh engine cache
    and its own tag; removed afterwards."""
    root = tmp_path_factory.mktemp("qwen-vl-image")
    started = time.perf_counter()
    with built_copy(docker_cli, base_image, qwen_vl_export, root, "mmaas-test/qwen-vl") as (
        image,
        report,
    ):
        assert {name: e["engine_cache"] for name, e in report["engines"].items()} == {
            "vision": "miss",
            "language": "miss",
        }
        print(f"cold build of models/qwen-vl: {time.perf_counter() - started:.0f} s")
        yield image


@pytest.fixture(scope="package")
def server(docker_cli: list[str], built: str) -> Iterator[Container]:
    """One container of the image, serving gRPC (first) and HTTP on free loopback ports,
    the OpenAI routes asking :data:`KEY`, fetching pictures from its own loopback (where
    the tests serve some); stopped after."""
    env = {"MMAAS_OPENAI_API_KEY": KEY, "MMAAS_FETCH_ALLOW": "127.0.0.1"}
    with run_container(docker_cli, built, env=env, ports=[8001, 8000]) as container:
        wait_for_grpc_serving(container.port, timeout=120, container=container)
        yield container


@pytest.fixture(scope="package")
def url(server: Container) -> str:
    """The container's gRPC address, ``127.0.0.1:PORT``."""
    return f"127.0.0.1:{server.port}"
