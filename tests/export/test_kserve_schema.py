"""The exported KServe objects against KServe's own API types (the KServe SDK from PyPI,
in the venv of its own that scripts/install_clients.sh makes: tests/export/kserve_schema.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from export_models import model_copy, source_of
from mmaas.export.kserve import kserve_objects
from mmaas.export.output import to_yaml
from paths import ROOT, TESTS

CHECKER = TESTS / "export" / "kserve_schema.py"
KSERVE_PYTHON = Path(os.environ.get("MMAAS_KSERVE_PYTHON", ROOT / ".venv-kserve/bin/python"))


def kserve_check(paths: list[Path]) -> subprocess.CompletedProcess[str]:
    if not KSERVE_PYTHON.is_file():
        pytest.fail(
            f"{KSERVE_PYTHON} is missing (the KServe SDK's venv); fix: run scripts/setup.sh",
            pytrace=False,
        )
    argv = [str(KSERVE_PYTHON), str(CHECKER), *map(str, paths)]
    return subprocess.run(argv, capture_output=True, text=True, check=False)


@pytest.mark.parametrize("mode", ["raw", "serverless"])
@pytest.mark.parametrize("protocol", ["grpc-v2", "v2"])
def test_kserve_objects_match_the_kserve_sdk_types(
    tmp_path: Path, ppocr_models: dict[str, Path], mode: str, protocol: str
) -> None:
    source = source_of(model_copy(tmp_path, ppocr_models["ppocr-det"], {}))
    written = []
    for name, document in kserve_objects(source, mode, protocol, None).items():
        written.append(tmp_path / name)
        written[-1].write_text(to_yaml(document))
    done = kserve_check(written)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count(": ok") == 2


def test_the_kserve_check_refuses_unknown_and_missing_fields(
    tmp_path: Path, ppocr_models: dict[str, Path]
) -> None:
    source = source_of(model_copy(tmp_path, ppocr_models["ppocr-det"], {}))
    objects = kserve_objects(source, "raw", "grpc-v2", None)
    objects["inferenceservice.yaml"]["spec"]["predictor"]["replicaz"] = 2
    del objects["servingruntime.yaml"]["spec"]["containers"][0]["name"]
    for name, document in objects.items():
        (tmp_path / name).write_text(to_yaml(document))
    done = kserve_check([tmp_path / name for name in objects])
    assert done.returncode == 1
    assert "replicaz: not a field of V1beta1PredictorSpec" in done.stdout
    assert "V1Container" in done.stdout and "name" in done.stdout
