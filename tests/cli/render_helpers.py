"""Helpers of the ``mmaas render`` CLI tests: the real console script, the printed commands."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from mmaas.core import proc
from paths import ROOT

MMAAS = str(Path(sys.executable).with_name("mmaas"))
HADOLINT = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
DOCKER = os.environ.get("MMAAS_DOCKER") or shutil.which("docker") or "docker"


def tensorrt_model(folder: Path, onnx: Path) -> Path:
    """A model folder whose model.yaml is ppocr-det's, switched to TensorRT at fp16, with
    the source path pointing at the real ONNX file."""
    text = (ROOT / "models" / "ppocr-det" / "model.yaml").read_text()
    text = text.replace("backend: onnxruntime ", "backend: tensorrt ")
    text = text.replace("target_precision: fp32 ", "target_precision: fp16 ")
    text = text.replace(f"path: {onnx.name}", f"path: {onnx}")
    assert "backend: tensorrt" in text and str(onnx) in text
    folder.mkdir()
    (folder / "model.yaml").write_text(text)
    return folder


def mmaas(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real ``mmaas`` console script in a subprocess; its exit status is not checked."""
    return proc.run([MMAAS, *args], check=False, env=env, what="mmaas")


def steps(stderr: str) -> list[list[str]]:
    """The printed commands: the shell line after each ``# N/M what`` comment."""
    lines = stderr.splitlines()
    return [
        shlex.split(lines[index + 1])
        for index, line in enumerate(lines)
        if re.match(r"# \d+/\d+ ", line)
    ]


def trtexec_line(stderr: str) -> list[str]:
    """The compile's own command render prints (a comment: it runs in the container)."""
    lines = stderr.splitlines()
    index = lines.index("# the compile command the builder stage runs, in its engine directory:")
    return shlex.split(lines[index + 1].removeprefix("#   "))
