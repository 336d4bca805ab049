"""`mmaas verify` names what is wrong with its target and never pulls an image."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from mmaas.cli import verify
from mmaas.core.errors import DockerError, UsageError


def test_a_folder_without_a_manifest_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / ".mmaas" / "engine").mkdir(parents=True)
    outcome = CliRunner().invoke(verify.command, [str(tmp_path)])
    assert isinstance(outcome.exception, UsageError)
    assert "not a model directory" in str(outcome.exception)
    assert ".mmaas/engine" in str(outcome.exception)


@pytest.mark.docker
def test_an_unknown_image_is_refused_without_a_pull(docker_cli: list[str]) -> None:
    outcome = CliRunner().invoke(verify.command, ["mmaas-test/no-such-image:0"])
    assert isinstance(outcome.exception, DockerError)
    assert "no image 'mmaas-test/no-such-image:0' in the local Docker engine" in str(
        outcome.exception
    )


@pytest.mark.docker
def test_an_image_not_built_by_mmaas_is_named(docker_cli: list[str], base_image: str) -> None:
    outcome = CliRunner().invoke(verify.command, [base_image])
    assert isinstance(outcome.exception, DockerError)
    assert "not an image built by mmaas" in str(outcome.exception)
