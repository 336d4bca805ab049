"""The helpers of the deploy end-to-end tests: the real CLI in a subprocess, where the
image holds the model, and images made ``FROM`` a built one."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from mmaas.core import proc
from mmaas_cli import run_mmaas
from paths import ROOT

MODEL_DIR = "/opt/mmaas/model"


def mmaas(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real CLI in a subprocess."""
    return run_mmaas(*args, cwd=ROOT, env=env)


@contextmanager
def derived(docker_cli: list[str], image: str, tag: str, lines: Sequence[str]) -> Iterator[str]:
    """``tag``: ``image`` with the Dockerfile ``lines`` added (``RUN`` steps run as root,
    the user is 10001 again after them); removed afterwards."""
    dockerfile = "\n".join([f"FROM {image}", "USER root", *lines, "USER 10001"]) + "\n"
    proc.run(
        [*docker_cli, "build", "--quiet", "--tag", tag, "-"],
        input_bytes=dockerfile.encode(),
        env={"DOCKER_BUILDKIT": "1"},
    )
    try:
        yield tag
    finally:
        proc.run([*docker_cli, "image", "rm", "--force", tag], check=False)
