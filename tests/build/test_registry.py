"""Pushing to a real registry (docker-registry with htpasswd auth on loopback)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from mmaas.build import docker as docker_engine
from mmaas.build.registry import PushResult, RegistryTarget, engine_tag, parse_registry, push_image
from mmaas.build.registry_calls import Credentials, credentials_from_env
from mmaas.cli import push as push_cli
from mmaas.core import proc
from mmaas.core.errors import RegistryError, UsageError
from registry_fixtures import ENGINE_LABEL_VALUE, LocalRegistry


def docker_config_file() -> Path:
    return Path(os.environ.get("DOCKER_CONFIG", Path.home() / ".docker")) / "config.json"


def config_snapshot() -> bytes | None:
    path = docker_config_file()
    return path.read_bytes() if path.exists() else None


def login(registry: LocalRegistry) -> Credentials:
    """The credentials ``registry`` accepts."""
    return Credentials(registry.user, registry.password)


def login_env(registry: LocalRegistry) -> dict[str, str]:
    """The environment that hands ``registry``'s credentials to the CLI."""
    return {"MMAAS_REGISTRY_USER": registry.user, "MMAAS_REGISTRY_PASSWORD": registry.password}


def push_tiny(
    image: str, registry: LocalRegistry, namespace: str = "mmaas", version: str = "1.0.0", **options
) -> PushResult:
    """:func:`push_image` of ``image`` as ``<registry>/<namespace>/tiny:<version>``;
    ``options`` (credentials, attempts, backoff_s) are passed on."""
    return push_image(image, RegistryTarget(registry.host, namespace), "tiny", version, **options)


def test_parse_registry_and_engine_tag() -> None:
    assert parse_registry("127.0.0.1:5000/mmaas") == RegistryTarget("127.0.0.1:5000", "mmaas")
    assert parse_registry("ghcr.io/org/team/").repository("m") == "ghcr.io/org/team/m"
    assert parse_registry("127.0.0.1:5000").repository("m") == "127.0.0.1:5000/m"
    assert parse_registry("[::1]:5000/a_b").host == "[::1]:5000"
    for bad in ("host/Upper", "not a registry", ":5000/x", "host:port/x", "-host/x", ""):
        with pytest.raises(UsageError, match="HOST:PORT/NAMESPACE") as caught:
            parse_registry(bad)
        assert caught.value.exit_code == 2
    assert engine_tag("blake3:" + "0123456789abcdef" * 4) == "blake3-0123456789abcdef"
    with pytest.raises(UsageError):
        engine_tag("no-hash")


def test_credentials_come_from_the_environment_only_with_a_password() -> None:
    found = credentials_from_env({"MMAAS_REGISTRY_USER": "u", "MMAAS_REGISTRY_PASSWORD": "p"})
    assert found == Credentials("u", "p") and "p" not in repr(found)
    assert credentials_from_env({"MMAAS_REGISTRY_USER": "u"}) is None  # docker's own login
    with pytest.raises(UsageError, match="MMAAS_REGISTRY_USER is not"):
        credentials_from_env({"MMAAS_REGISTRY_PASSWORD": "p"})


@pytest.mark.docker
def test_push_pull_back_and_digests_agree(
    local_registry: LocalRegistry, tiny_image: str, tmp_path: Path, monkeypatch
) -> None:
    argvs: list[list[str]] = []
    real_run = proc.run

    def recording_run(argv, **kwargs):  # spy: records each argv, then runs it for real
        argvs.append(list(argv))
        return real_run(argv, **kwargs)

    monkeypatch.setattr(proc, "run", recording_run)
    before = config_snapshot()
    result = push_tiny(tiny_image, local_registry, credentials=login(local_registry))

    assert result.tags == ("1.0.0", "blake3-" + "ab12" * 4)
    assert result.engine == ENGINE_LABEL_VALUE
    assert result.reference == f"{local_registry.host}/mmaas/tiny@{result.digest}"
    for tag in result.tags:
        assert local_registry.manifest_digest("mmaas/tiny", tag) == result.digest
    assert not any(local_registry.password in arg for argv in argvs for arg in argv)
    assert config_snapshot() == before  # credentials lived in a deleted temp config only

    client = docker_engine.client()
    subprocess.run(
        client.argv(
            "image",
            "rm",
            "--force",
            tiny_image,
            *(f"{result.repository}:{tag}" for tag in result.tags),
        ),
        check=True,
        capture_output=True,
    )
    config = tmp_path / "docker-config"
    local_registry.docker_login(client.argv(), config)
    subprocess.run(
        client.argv("--config", str(config), "pull", result.reference),
        check=True,
        capture_output=True,
    )
    pulled = docker_engine.inspect_image(result.reference)
    assert result.reference in pulled["RepoDigests"]
    assert docker_engine.image_labels(result.reference)["io.mmaas.engine.blake3"] == result.engine


@pytest.mark.docker
def test_a_wrong_password_fails_at_once_without_retries(
    local_registry: LocalRegistry, tiny_image: str
) -> None:
    wrong = Credentials(local_registry.user, "wrong")
    started = time.monotonic()
    with pytest.raises(RegistryError, match="refused the credentials") as caught:
        push_tiny(tiny_image, local_registry, credentials=wrong, attempts=3, backoff_s=5.0)
    assert time.monotonic() - started < 5.0  # no backoff wait: auth errors are final
    assert caught.value.exit_code == 1
    assert "wrong" not in str(caught.value)


@pytest.mark.docker
def test_a_stopped_registry_is_reported_after_the_retries(make_registry, tiny_image: str) -> None:
    registry = make_registry()
    registry.stop()
    with pytest.raises(RegistryError, match=r"cannot be reached .* after 2 attempt\(s\)"):
        push_tiny(tiny_image, registry, credentials=login(registry), attempts=2, backoff_s=0.1)
    with pytest.raises(RegistryError, match="cannot be reached"):  # docker's own config
        push_tiny(tiny_image, registry, credentials=None, attempts=1)


@pytest.mark.docker
def test_a_registry_that_comes_up_late_is_reached_by_the_retries(
    make_registry, tiny_image: str
) -> None:
    registry = make_registry(start=False)
    starter = threading.Timer(1.0, registry.start)
    starter.start()
    try:
        result = push_tiny(
            tiny_image,
            registry,
            "late",
            "2.0",
            credentials=login(registry),
            attempts=5,
            backoff_s=0.5,
        )
    finally:
        starter.join()
    assert registry.manifest_digest("late/tiny", "2.0") == result.digest


@pytest.mark.docker
def test_an_image_without_the_engine_label_is_refused(
    local_registry: LocalRegistry, tiny_image: str
) -> None:
    client = docker_engine.client()
    unlabelled = tiny_image + "-unlabelled"
    subprocess.run(
        client.argv("import", "-", unlabelled), input=b"\0" * 1024, check=False, capture_output=True
    )
    try:
        with pytest.raises(UsageError, match=r"io\.mmaas\.engine\.blake3"):
            push_tiny(unlabelled, local_registry, version="1", credentials=None)
    finally:
        subprocess.run(
            client.argv("image", "rm", "--force", unlabelled), check=False, capture_output=True
        )


@pytest.mark.docker
def test_push_command_prints_the_digest_as_json(
    local_registry: LocalRegistry, tiny_image: str, ppocr_models
) -> None:
    model_dir = ppocr_models["ppocr-cls"].parent
    outcome = CliRunner().invoke(
        push_cli.command,
        [
            str(model_dir),
            "--registry",
            f"{local_registry.host}/ci",
            "--image",
            tiny_image,
            "--json",
        ],
        env=login_env(local_registry),
    )
    assert outcome.exit_code == 0, outcome.output
    printed = json.loads(outcome.stdout)
    assert printed["repository"] == f"{local_registry.host}/ci/ppocr-cls"
    assert printed["tags"] == ["1.0.0", "blake3-" + "ab12" * 4]
    assert printed["digest"] == local_registry.manifest_digest("ci/ppocr-cls", "1.0.0")
    assert local_registry.password not in outcome.output


@pytest.mark.docker
@pytest.mark.slow
def test_build_push_builds_then_pushes_and_prints_the_digest(
    local_registry: LocalRegistry, ppocr_models
) -> None:
    """`mmaas build --push`: the real build of ppocr-cls, then the push of its image with
    the engine-hash tag; the digest printed is the one the registry stored."""
    from mmaas.cli import build as build_cli

    outcome = CliRunner().invoke(
        build_cli.command,
        [str(ppocr_models["ppocr-cls"].parent), "--push", f"{local_registry.host}/ci", "--json"],
        env=login_env(local_registry),
    )
    assert outcome.exit_code == 0, outcome.output
    printed = json.loads(outcome.stdout)
    pushed = printed["pushed"]
    assert pushed["repository"] == f"{local_registry.host}/ci/ppocr-cls"
    assert pushed["tags"] == ["1.0.0", "blake3-" + printed["engine"]["blake3"][7:23]]
    assert pushed["digest"] == local_registry.manifest_digest("ci/ppocr-cls", "1.0.0")
    assert local_registry.password not in outcome.output
