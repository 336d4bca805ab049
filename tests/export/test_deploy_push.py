"""The signed image through a real registry: push, remove, pull by digest and verify, an
export pinned to the digest, and a tampered pushed image refused by `mmaas verify`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from deploy_e2e import MODEL_DIR, mmaas

from docker_fixtures import tampered_image
from mmaas.core import proc
from registry_fixtures import LocalRegistry

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_push_remove_pull_by_digest_verify_and_a_tampered_push_is_refused(
    signed, docker_cli, keys, local_registry: LocalRegistry, tmp_path: Path
) -> None:
    """Runs last (tests/export/conftest.py orders it so): it removes the shared signed
    image and gets it back by digest."""
    folder, image = signed
    env = {
        **os.environ,
        "MMAAS_REGISTRY_USER": local_registry.user,
        "MMAAS_REGISTRY_PASSWORD": local_registry.password,
    }
    pushed = mmaas(
        "push", str(folder), "--registry", f"{local_registry.host}/ci", "--json", env=env
    )
    assert pushed.returncode == 0, pushed.stderr
    reference = json.loads(pushed.stdout)["reference"]
    repository = reference.split("@")[0]
    tags = json.loads(pushed.stdout)["tags"]
    proc.run([*docker_cli, "image", "rm", "--force", image, *(f"{repository}:{t}" for t in tags)])
    assert proc.run([*docker_cli, "image", "inspect", reference], check=False).returncode != 0
    done = mmaas("verify", reference, "--pull", "--key", str(keys["public"]), "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["trusted_key"]
    exported = mmaas(
        "export", "kserve", str(folder), "-o", str(tmp_path / "k"), "--image", reference
    )
    assert exported.returncode == 0, exported.stderr
    runtime = yaml.safe_load((tmp_path / "k" / "servingruntime.yaml").read_text())
    assert runtime["spec"]["containers"][0]["image"] == reference
    engine = f"{MODEL_DIR}/model.ort.onnx"
    proc.run([*docker_cli, "tag", reference, f"{repository}:pulled"])
    with tampered_image(
        docker_cli, f"{repository}:pulled", engine, f"{repository}:tampered"
    ) as tampered:
        config = tmp_path / "docker-config"
        local_registry.docker_login(docker_cli, config)
        out = proc.run([*docker_cli, "--config", str(config), "push", tampered]).stdout
        digest = out.split("digest: ")[1].split()[0]
    bad = f"{repository}@{digest}"
    done = mmaas("verify", bad, "--pull", "--key", str(keys["public"]), env=env)
    assert done.returncode == 1 and "does not match its manifest" in done.stderr
    proc.run(
        [*docker_cli, "image", "rm", "--force", bad, reference, f"{repository}:pulled"], check=False
    )
