"""``mmaas doctor`` on this machine, for real: it must say what is true here (no GPU ->
TensorRT not usable, with the reason), exit 1 when no back end can build,
and name DOCKER_HOST with Docker's own error line when the engine is out of reach."""

from __future__ import annotations

import json
import shutil
import socket
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mmaas.backends import BACKENDS, Parts
from mmaas.backends.tensorrt.runtime.gpu import query_gpus
from mmaas.build import docker as docker_engine
from mmaas.build import doctor
from mmaas.build.doctor import diagnose
from mmaas.cli.doctor import command
from mmaas.core import proc
from mmaas.core.errors import DockerError

MMAAS = str(Path(sys.executable).with_name("mmaas"))


def docker_reachable() -> bool:
    try:
        docker_engine.client()
    except DockerError:
        return False
    return True


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed again when the block ends


def test_doctor_tells_the_truth_about_this_host() -> None:
    report = diagnose()
    checks = {check.name: check for check in report.checks}
    assert list(checks) == [
        "docker",
        "buildkit",
        "onnxruntime",
        "gpus",
        "nvidia-container-runtime",
        "tensorrt",
    ]
    assert checks["docker"].ok == docker_reachable()
    assert checks["gpus"].ok == bool(query_gpus().gpus)
    assert checks["onnxruntime"].ok and "ONNX Runtime 1." in checks["onnxruntime"].detail
    backends = {status.name: status for status in report.backends}
    assert list(backends) == list(BACKENDS)
    assert backends["onnxruntime"].usable == docker_reachable() == report.usable
    if shutil.which("nvidia-smi") is None:
        assert not checks["gpus"].ok and "nvidia-smi not found" in checks["gpus"].detail
        assert not backends["tensorrt"].usable
        assert "gpus: nvidia-smi not found" in backends["tensorrt"].reason


def test_doctor_json_and_text_output() -> None:
    runner = CliRunner()
    done = runner.invoke(command, ["--json"])
    data = json.loads(done.stdout)
    assert {b["name"] for b in data["backends"]} == {"onnxruntime", "tensorrt"}
    assert data["usable"] == docker_reachable()
    # Without an engine the verdict goes to stderr and the exit code is 1; stdout stays JSON.
    assert done.exit_code == (0 if data["usable"] else 1), done.stderr
    text = runner.invoke(command, []).output
    assert "backend tensorrt: " in text and "[ok] onnxruntime: ONNX Runtime" in text


def test_doctor_exits_1_when_no_back_end_is_usable_naming_docker_host() -> None:
    """A real client against an address where no engine listens: DOCKER_HOST is named,
    Docker's own error line is shown, and the exit code says nothing can build."""
    host = f"tcp://127.0.0.1:{closed_port()}"
    env = {"DOCKER_HOST": host, "MMAAS_DOCKER": ""}
    done = proc.run([MMAAS, "doctor"], env=env, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"[--] docker: cannot reach a Docker engine at DOCKER_HOST={host}\n" in done.stdout
    assert f"Cannot connect to the Docker daemon at {host}. Is the docker daemon running?" in (
        done.stdout
    )
    assert f"hint: DOCKER_HOST={host} is set" in done.stdout
    reason = f"(docker: cannot reach a Docker engine at DOCKER_HOST={host})"
    assert f"backend onnxruntime: NOT usable {reason}" in done.stdout
    assert (
        done.stderr == "error: no back end can build images on this host (see the report above)\n"
    )
    as_json = proc.run([MMAAS, "doctor", "--json"], env=env, check=False)
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["usable"] is False


def test_docker_error_without_docker_host_names_the_client_and_how_to_start(
    tmp_path: Path,
) -> None:
    missing = proc.run(
        [MMAAS, "doctor"], env={"MMAAS_DOCKER": str(tmp_path / "no-docker")}, check=False
    )
    assert "cannot reach a Docker engine\n" in missing.stdout
    assert f"{tmp_path / 'no-docker'}: docker version: program not found" in missing.stdout
    assert "hint: start the engine" in missing.stdout


def test_doctor_knows_no_back_end_by_name() -> None:
    """Per-back-end checks live in the back ends' build targets (BuildTarget.readiness)."""
    source = Path(doctor.__file__).read_text()
    for name in BACKENDS:
        assert name not in source.lower().replace("mmaas.backends", "")


def test_a_back_end_whose_target_does_not_load_is_not_usable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broken = "mmaas.backends.not_installed.target:Target"
    monkeypatch.setitem(BACKENDS, "not-installed", Parts(broken, broken, broken))
    status = {s.name: s for s in diagnose().backends}["not-installed"]
    assert not status.usable
    assert status.reason == (
        "its build target does not load (No module named 'mmaas.backends.not_installed')"
    )
