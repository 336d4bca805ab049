"""Pytest plugin: a real container registry (Debian's ``docker-registry``, distribution 2.8)
with htpasswd auth on a loopback port, and a tiny local image to push.

Load it from tests/conftest.py with ``pytest_plugins = ["registry_fixtures"]`` (after
``docker_fixtures``, whose ``docker_cli`` it uses). Like that plug-in it never skips: a
missing ``docker-registry`` fails with the fix, as CI has it (scripts/setup.sh). Every
registry runs in the test's tmp_path (its storage, config and htpasswd file) and is
stopped by PID when the test ends.
"""

from __future__ import annotations

import base64
import io
import json
import secrets
import shutil
import socket
import subprocess
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import bcrypt
import pytest
import yaml

REGISTRY_BINARY = "docker-registry"
READY_TIMEOUT_S = 15.0
ENGINE_LABEL_VALUE = "blake3:" + "ab12" * 16
MANIFEST_TYPES = (
    "application/vnd.docker.distribution.manifest.v2+json, "
    "application/vnd.oci.image.manifest.v1+json"
)


@dataclass
class LocalRegistry:
    """A running registry at ``host`` (``127.0.0.1:PORT``) accepting ``user``/``password``."""

    folder: Path
    port: int
    user: str
    password: str = field(repr=False)
    process: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> LocalRegistry:
        """Start ``docker-registry serve`` and wait until ``/v2/`` answers (401)."""
        config = write_config(self.folder, self.port, self.user, self.password)
        log = (self.folder / "registry.log").open("ab")
        self.process = subprocess.Popen(
            [REGISTRY_BINARY, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"docker-registry exited: {self.log_tail()}")
            if v2_status(self.host) is not None:
                return self
            time.sleep(0.1)
        raise RuntimeError(f"docker-registry not ready in {READY_TIMEOUT_S} s: {self.log_tail()}")

    def stop(self) -> None:
        """Stop the registry process we started (by its PID) and wait for it."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None

    def docker_login(self, docker: list[str], config: Path) -> None:
        """``docker --config CONFIG login`` to this registry (the password on stdin), so a
        test can pull or push with its own Docker client config, apart from mmaas's."""
        subprocess.run(
            [*docker, "--config", str(config), "login", "--username", self.user,
             "--password-stdin", self.host],
            input=self.password.encode(),
            check=True,
            capture_output=True,
        )  # fmt: skip

    def manifest_digest(self, repository: str, tag: str) -> str:
        """The digest the registry itself reports for ``repository:tag`` (HEAD manifest)."""
        request = self._request(f"/v2/{repository}/manifests/{tag}", method="HEAD")
        request.add_header("Accept", MANIFEST_TYPES)
        with urllib.request.urlopen(request, timeout=5) as answer:
            return str(answer.headers["Docker-Content-Digest"])

    def catalog(self) -> list[str]:
        """Every repository the registry holds (``/v2/_catalog``)."""
        with urllib.request.urlopen(self._request("/v2/_catalog"), timeout=5) as answer:
            return list(json.load(answer)["repositories"])

    def _request(self, path: str, method: str = "GET") -> urllib.request.Request:
        token = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        return urllib.request.Request(
            f"http://{self.host}{path}", method=method, headers={"Authorization": f"Basic {token}"}
        )

    def log_tail(self) -> str:
        path = self.folder / "registry.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""


def write_config(folder: Path, port: int, user: str, password: str) -> Path:
    """Write htpasswd (bcrypt, as distribution requires) and a registry config.yml."""
    folder.mkdir(parents=True, exist_ok=True)
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=5)).decode()
    (folder / "htpasswd").write_text(f"{user}:{hashed}\n")
    config = folder / "config.yml"
    settings = {
        "version": 0.1,
        "log": {"level": "warn"},
        "storage": {
            "filesystem": {"rootdirectory": str(folder / "data")},
            "delete": {"enabled": True},
        },
        "http": {"addr": f"127.0.0.1:{port}", "secret": secrets.token_hex(16)},
        "auth": {"htpasswd": {"realm": "mmaas-test", "path": str(folder / "htpasswd")}},
    }
    config.write_text(yaml.safe_dump(settings))
    return config


def v2_status(host: str) -> int | None:
    """HTTP status of ``GET http://host/v2/`` (401 when up with auth); None when down."""
    try:
        with urllib.request.urlopen(f"http://{host}/v2/", timeout=1) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def make_registry(tmp_path: Path) -> Iterator[object]:
    """Factory ``make_registry(start=True) -> LocalRegistry``; all are stopped at the end."""
    if shutil.which(REGISTRY_BINARY) is None:
        pytest.fail(
            "docker-registry is not installed; fix: run scripts/setup.sh (as root: "
            "apt-get install docker-registry)",
            pytrace=False,
        )
    made: list[LocalRegistry] = []

    def make(start: bool = True) -> LocalRegistry:
        registry = LocalRegistry(
            tmp_path / f"registry-{len(made)}", free_port(), "ci-user", secrets.token_urlsafe(12)
        )
        made.append(registry)
        return registry.start() if start else registry

    yield make
    for registry in made:
        registry.stop()


@pytest.fixture
def local_registry(make_registry) -> LocalRegistry:
    """One running registry with htpasswd auth on a loopback port."""
    return make_registry()


@pytest.fixture
def tiny_image(docker_cli: list[str]) -> Iterator[str]:
    """A few-file image made with ``docker import`` (no pulls), labelled like an mmaas
    image (``io.mmaas.engine.blake3``); removed afterwards with every tag it got."""
    reference = f"mmaas-test/tiny:{secrets.token_hex(4)}"
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for name, text in {"hello.txt": "hello\n", "opt/mmaas/model/engine": reference}.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    label = f"LABEL io.mmaas.engine.blake3={ENGINE_LABEL_VALUE}"
    imported = subprocess.run(
        [*docker_cli, "import", "--change", label, "-", reference],
        input=archive.getvalue(),
        capture_output=True,
        check=True,
    )
    image_id = imported.stdout.decode().strip()
    yield reference
    subprocess.run(
        [*docker_cli, "image", "rm", "--force", image_id], capture_output=True, check=False
    )
