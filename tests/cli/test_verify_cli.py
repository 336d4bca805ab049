"""`mmaas verify` names what is wrong with its target and never pulls an image."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.build.test_current import model_dir

from export_models import openssl_key
from mmaas.cli import verify
from mmaas.core.errors import DockerError, IntegrityError, UsageError


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


def test_a_bad_key_file_is_a_usage_error_even_for_an_unsigned_model(tmp_path: Path) -> None:
    """--key is read before the target: a file that is no public key is exit 2 whether or
    not the target is signed; a good key on an unsigned target is exit 1, with the fix."""
    unsigned = model_dir(tmp_path)
    private, public = openssl_key(tmp_path, "ci")
    not_a_key = tmp_path / "notes.txt"
    not_a_key.write_text("hello\n")
    for bad, message in ((not_a_key, "no PEM public key"), (private, "a private key")):
        outcome = CliRunner().invoke(verify.command, [str(unsigned), "--key", str(bad)])
        assert isinstance(outcome.exception, UsageError), outcome.output
        assert message in str(outcome.exception)
    outcome = CliRunner().invoke(verify.command, [str(unsigned), "--key", str(public)])
    assert isinstance(outcome.exception, IntegrityError)
    assert "unsigned" in str(outcome.exception) and "drop --key" in str(outcome.exception)
