"""The signed image on a real Docker engine: `mmaas build --sign` -> `mmaas verify --key`
(its key only, the provenance record inside the signed manifest), the SBOM and labels in
the image (C33), and the server refusing untrusted and unsigned engines."""

from __future__ import annotations

import json

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from deploy_e2e import MODEL_DIR, derived, mmaas

from docker_fixtures import run_to_exit
from mmaas.core import proc
from mmaas.core.hashing import file_digests
from mmaas.core.sbom import missing

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def in_image(docker_cli: list[str], image: str, code: str) -> str:
    """What ``python -c code`` prints in a fresh container of ``image``."""
    argv = [*docker_cli, "run", "--rm", "--entrypoint", "python", image, "-c", code]
    return proc.run(argv).stdout


def test_signed_image_verifies_with_its_key_only(signed, keys) -> None:
    _, image = signed
    ok = mmaas("verify", image, "--key", str(keys["public"]), "--json")
    assert ok.returncode == 0, ok.stderr
    report = json.loads(ok.stdout)
    assert report["trusted_key"] == report["signed_by"]
    # the provenance record, inside the signed manifest
    provenance = report["provenance"]
    folder, _ = signed
    onnx = next(folder.glob("*.onnx"))
    source = provenance["engines"]["model"]["source"]
    assert source["blake3"] == file_digests(onnx)["blake3"] and source["path"] == onnx.name
    assert provenance["engines"]["model"]["command"]  # ONNX Runtime's options, as run
    builder = provenance["builder_images"]["model"]
    assert builder["reference"] == "mmaas/base:bookworm"
    assert builder["content"].startswith("sha256:")
    assert provenance["git"] is None and provenance["workflow_run"] is None  # a temp copy
    refused = mmaas("verify", image, "--key", str(keys["other"]))
    assert refused.returncode == 1 and "which is not trusted" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_sbom_lists_every_shipped_distribution_and_validates(signed, docker_cli) -> None:
    """The SBOM at the labelled path validates against CycloneDX 1.6 and lists every
    distribution the server's interpreter can import, with its exact version (C33)."""
    _, image = signed
    labels = json.loads(proc.run([*docker_cli, "image", "inspect", image]).stdout)[0]["Config"][
        "Labels"
    ]
    text = in_image(docker_cli, image, f"print(open({labels['io.mmaas.sbom']!r}).read())")
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    shipped = json.loads(
        in_image(
            docker_cli,
            image,
            "import json; from mmaas.core.sbom import installed; print(json.dumps(installed()))",
        )
    )
    assert {"onnxruntime", "numpy", "grpcio", "cryptography", "mmaas"} <= set(shipped)
    sbom = json.loads(text)
    assert missing(sbom, shipped) == []
    scope = {p["name"] for p in sbom["metadata"]["properties"]}
    assert "mmaas:sbom:out-of-scope" in scope
    assert "cyclonedx" not in " ".join(shipped)  # the generator never reaches the image


def test_server_refuses_untrusted_and_unsigned_engines(signed, docker_cli, keys) -> None:
    _, image = signed
    untrusted = {"MMAAS_TRUSTED_KEYS": keys["other"].read_text()}
    code, logs = run_to_exit(docker_cli, image, env=untrusted)
    assert code == 1
    assert "which is not trusted" in logs
    unsigned = f"{image}-unsigned"
    with derived(docker_cli, image, unsigned, [f"RUN rm {MODEL_DIR}/manifest.sig.json"]) as tag:
        env = {"MMAAS_TRUSTED_KEYS": keys["public"].read_text()}
        code, logs = run_to_exit(docker_cli, tag, env=env)
        assert code == 1
        assert "unsigned" in logs and "Traceback" not in logs
