"""The Docker side of the build benchmark (scripts/bench_build.py): the registry it shares
engines through, an image's bytes per layer group, and the removal of the run's images."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sys
import tarfile
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mmaas.build import docker as docker_engine
from mmaas.build.registry import RegistryTarget, parse_registry
from mmaas.core import proc

ROOT = Path(__file__).resolve().parent.parent
LAYER_GROUPS = (
    (
        "framework",
        ("requirements-runtime.txt", "image-constraints.txt", "ENV PATH=", "ca-bundle.pem"),
    ),
    ("engine + manifest", ("/opt/mmaas/engine", "manifest.json")),
    ("mmaas code", ("COPY wheels/", "mmaas-0.1.0-py3-none-any.whl")),
)


def layer_sizes(image: str, base: str) -> dict[str, dict[str, int]]:
    """Bytes per layer group of ``image``: each layer's tar as ``docker save`` writes it
    (``bytes``) and gzip-compressed at level 6 as a registry stores it (``gzip_bytes``).
    Layers map to their instructions through the image config's history (``empty_layer``
    entries have no tar); the first entries, as many as ``base``'s history has, are the
    base."""
    base_entries = len(saved_history(base)[0])
    history, layers = saved_history(image)
    groups: dict[str, dict[str, int]] = {}
    tars = iter(layers)
    for index, entry in enumerate(history):
        if entry.get("empty_layer"):
            continue
        created_by = entry.get("created_by", "")
        group = (
            "base"
            if index < base_entries
            else next(
                (name for name, marks in LAYER_GROUPS if any(m in created_by for m in marks)),
                "other",
            )
        )
        size, packed = next(tars)
        totals = groups.setdefault(group, {"bytes": 0, "gzip_bytes": 0})
        totals["bytes"] += size
        totals["gzip_bytes"] += packed
    return groups


def saved_history(image: str) -> tuple[list[dict[str, Any]], list[tuple[int, int]]]:
    """``docker save`` of ``image``: its config history, and (bytes, gzip bytes) of each
    layer tar in order."""
    with tempfile.TemporaryDirectory(prefix="mmaas-bench-save-") as scratch:
        archive = Path(scratch) / "image.tar"
        proc.run(
            docker_engine.client().argv("save", "--output", str(archive), image), what="docker save"
        )
        with tarfile.open(archive) as tar:
            manifest = json.load(_member(tar, "manifest.json"))[0]
            config = json.load(_member(tar, manifest["Config"]))
            layers = [
                (tar.getmember(name).size, _gzip_size(_member(tar, name)))
                for name in manifest["Layers"]
            ]
    return config.get("history", []), layers


def _member(tar: tarfile.TarFile, name: str) -> Any:
    stream = tar.extractfile(name)
    if stream is None:
        raise ValueError(f"docker save archive has no file {name}")
    return stream


def _gzip_size(stream: Any) -> int:
    packer, size = zlib.compressobj(6, zlib.DEFLATED, 31), 0
    while chunk := stream.read(1 << 20):
        size += len(packer.compress(chunk))
    return size + len(packer.flush())


def remove_images(repository: str) -> None:
    """Remove every local image of ``repository`` (all its tags)."""
    found = proc.run(
        docker_engine.client().argv(
            "image", "ls", "--quiet", "--filter", f"reference={repository}"
        ),
        check=False,
    )
    ids = sorted(set(found.stdout.split()))
    if ids:
        proc.run(docker_engine.client().argv("image", "rm", "--force", *ids), check=False)


@contextlib.contextmanager
def registry_for(address: str | None, scratch: Path) -> Iterator[RegistryTarget]:
    """The given registry, or a local docker-registry with htpasswd auth on loopback whose
    credentials go into ``MMAAS_REGISTRY_USER``/``_PASSWORD`` (stopped by PID at the end)."""
    if address:
        yield parse_registry(address)
        return
    sys.path.insert(0, str(ROOT / "tests"))
    from registry_fixtures import LocalRegistry, free_port

    registry = LocalRegistry(
        scratch / "registry", free_port(), "bench", secrets.token_urlsafe(12)
    ).start()
    saved = {k: os.environ.get(k) for k in ("MMAAS_REGISTRY_USER", "MMAAS_REGISTRY_PASSWORD")}
    os.environ.update(MMAAS_REGISTRY_USER=registry.user, MMAAS_REGISTRY_PASSWORD=registry.password)
    try:
        yield RegistryTarget(registry.host, "bench")
    finally:
        registry.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
