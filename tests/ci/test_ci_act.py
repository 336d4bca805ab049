"""End to end: the models workflow under act (``mmaas ci local``) on a clone of this project.

A push that changes models/ppocr-cls/ builds, verifies and pushes exactly that image to a
real local registry, with its digest in the job summary; a push that changes nothing under
models/ builds nothing (act ignores ``paths:`` filters, so change detection decides).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from git_repos import GitRepo
from mmaas.cli import VERBS
from paths import ROOT
from registry_fixtures import LocalRegistry

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1800)]


def clone_of_this_project(tmp_path: Path) -> GitRepo:
    """A clone of the committed project (what CI checks out)."""
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(tmp_path / "project")], check=True)
    repo = GitRepo.__new__(GitRepo)
    repo.path = tmp_path / "project"
    repo.git("config", "user.email", "ci@example.invalid")
    repo.git("config", "user.name", "CI test")
    return repo


def run_local(repo: GitRepo, registry: LocalRegistry) -> str:
    """``mmaas ci local`` for the last commit; returns act's combined output."""
    assert {"ci", "push"} <= set(VERBS), "register mmaas.cli.ci and mmaas.cli.push"
    env = {
        **os.environ,
        "MMAAS_REGISTRY_USER": registry.user,
        "MMAAS_REGISTRY_PASSWORD": registry.password,
    }
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "mmaas"),
            "ci",
            "local",
            "--repo",
            str(repo.path),
            "--registry",
            f"{registry.host}/e2e",
            "--base",
            "HEAD~1",
            "--head",
            "HEAD",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert registry.password not in output
    return output


@pytest.fixture
def registry(local_registry: LocalRegistry, docker_cli: list[str]) -> Iterator[LocalRegistry]:
    """The local registry; afterwards the local tags the push made for it are removed."""
    yield local_registry
    listed = subprocess.run(
        [*docker_cli, "image", "ls", "--format", "{{.Repository}}:{{.Tag}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    pushed = [tag for tag in listed if tag.startswith(f"{local_registry.host}/")]
    if pushed:
        subprocess.run([*docker_cli, "image", "rm", *pushed], capture_output=True, check=False)


def test_a_change_under_models_pushes_exactly_that_image(
    tmp_path: Path, registry: LocalRegistry
) -> None:
    repo = clone_of_this_project(tmp_path)
    repo.write(
        "models/ppocr-cls/README.md",
        (repo.path / "models/ppocr-cls/README.md").read_text() + "\nCI change.\n",
    )
    repo.commit("ppocr-cls: touch its README")
    output = run_local(repo, registry)

    assert registry.catalog() == ["e2e/ppocr-cls"]
    row = re.search(
        r"\| ppocr-cls \| onnxruntime \| `blake3:(?P<engine>[0-9a-f]{64})` \| "
        r"`(?P<ref>\S+@(?P<digest>sha256:[0-9a-f]{64}))` \| [\d.]+ s \|",
        output,
    )
    assert row, output[-4000:]
    assert row["ref"].startswith(f"{registry.host}/e2e/ppocr-cls@")
    for tag in ("1.0.0", f"blake3-{row['engine'][:16]}"):
        assert registry.manifest_digest("e2e/ppocr-cls", tag) == row["digest"]
    assert "build ppocr-det" not in output and "build ppocr-rec" not in output


def test_a_change_outside_models_builds_nothing(tmp_path: Path, registry: LocalRegistry) -> None:
    repo = clone_of_this_project(tmp_path)
    repo.write("docs/ci-note.md", "Nothing under models/ changes.\n")
    repo.commit("docs only")
    output = run_local(repo, registry)
    assert "0 model(s) to build" in output
    assert "count=0" in output
    assert "Run Main Build" not in output
    assert registry.catalog() == []
