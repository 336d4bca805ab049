"""``mmaas doctor`` on this machine, for real: it must say what is true here (no GPU ->
TensorRT not usable, with the reason)."""

from __future__ import annotations

import json
import shutil

from click.testing import CliRunner

from mmaas.backends.tensorrt.gpu import query_gpus
from mmaas.build import docker as docker_engine
from mmaas.build.doctor import diagnose
from mmaas.cli.doctor import command
from mmaas.core.errors import DockerError


def docker_reachable() -> bool:
    try:
        docker_engine.client()
    except DockerError:
        return False
    return True


def test_doctor_tells_the_truth_about_this_host() -> None:
    report = diagnose()
    checks = {check.name: check for check in report.checks}
    assert list(checks) == [
        "docker",
        "buildkit",
        "gpus",
        "nvidia-container-runtime",
        "tensorrt",
        "onnxruntime",
    ]
    assert checks["docker"].ok == docker_reachable()
    assert checks["gpus"].ok == bool(query_gpus().gpus)
    assert checks["onnxruntime"].ok and "ONNX Runtime 1." in checks["onnxruntime"].detail
    backends = {status.name: status for status in report.backends}
    assert backends["onnxruntime"].usable == docker_reachable()
    if shutil.which("nvidia-smi") is None:
        assert not checks["gpus"].ok and "nvidia-smi not found" in checks["gpus"].detail
        assert not backends["tensorrt"].usable
        assert "gpus: nvidia-smi not found" in backends["tensorrt"].reason


def test_doctor_json_and_text_output() -> None:
    runner = CliRunner()
    data = json.loads(runner.invoke(command, ["--json"]).output)
    assert {b["name"] for b in data["backends"]} == {"onnxruntime", "tensorrt"}
    text = runner.invoke(command, []).output
    assert "backend tensorrt: " in text and "[ok] onnxruntime: ONNX Runtime" in text
