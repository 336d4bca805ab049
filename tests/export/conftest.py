"""Fixtures of the deploy end-to-end tests: Ed25519 keys, and one signed image of a copy of
models/ppocr-det (its engine from the engine cache when another test compiled it) for the
whole session, removed after it. The push test removes that image and gets it back by
digest only, so it runs after every other test."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest
import yaml
from deploy_e2e import mmaas

from export_models import model_copy, openssl_key
from mmaas.core import proc

SETTINGS = {
    "runtime": {"dynamic_batching": {"preferred_batch_size": [2, 4]}, "shutdown_grace_seconds": 3},
    "deploy": {"pre_stop_seconds": 2},
}


@pytest.fixture(scope="session")
def keys(tmp_path_factory) -> dict[str, Path]:
    """Two Ed25519 key pairs made with openssl: ``private``/``public`` sign and verify,
    ``other`` is a public key that trusts neither."""
    folder = tmp_path_factory.mktemp("keys")
    private, public = openssl_key(folder, "ci")
    _, other = openssl_key(folder, "other")
    return {"private": private, "public": public, "other": other}


@pytest.fixture(scope="session")
def signed(docker_cli, base_image, ppocr_models, keys, tmp_path_factory):
    """``(model folder, image tag)`` of a signed build of a ppocr-det copy; removed after."""
    folder = model_copy(tmp_path_factory.mktemp("det"), ppocr_models["ppocr-det"], SETTINGS)
    tag = f"mmaas-test/deploy-det:{secrets.token_hex(4)}"
    spec = yaml.safe_load((folder / "model.yaml").read_text())
    spec["image"] = {"repository": tag.split(":")[0], "tag": tag.split(":")[1]}
    (folder / "model.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    built = mmaas("build", str(folder), "--sign", str(keys["private"]), "--json")
    assert built.returncode == 0, built.stderr[-3000:]
    assert json.loads(built.stdout)["signature"]["key_id"].startswith("ed25519:")
    assert str(keys["private"].read_text().splitlines()[1]) not in built.stderr + built.stdout
    yield folder, tag
    proc.run([*docker_cli, "image", "rm", "--force", tag], check=False)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the push test (tests/export/test_deploy_push.py) after every other test: it
    removes the shared signed image."""
    items.sort(key=lambda item: item.path.name == "test_deploy_push.py")
