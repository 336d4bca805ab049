"""The timing-cache store and ``mmaas cache``: keys (C8), damaged caches, concurrent
commits from real processes, export/import/prune through the click group."""

from __future__ import annotations

import json
import multiprocessing
import tarfile
from pathlib import Path

from click.testing import CliRunner

from mmaas.backends.tensorrt.timing_cache import CacheKey, TimingCacheStore
from mmaas.cli.cache import command

A10 = CacheKey("10.13.2", "8.6", "NVIDIA A10")
H100 = CacheKey("10.13.2", "9.0", "NVIDIA H100 PCIe")


def produced(tmp_path: Path, payload: bytes, name: str = "out.cache") -> Path:
    path = tmp_path / name
    path.write_bytes(payload)
    return path


def test_key_slug_names_version_capability_and_gpu() -> None:
    assert A10.slug == "trt10.13.2-sm86-nvidia-a10"
    assert H100.slug == "trt10.13.2-sm90-nvidia-h100-pcie"


def test_commit_then_checkout_reuses_only_the_matching_key(tmp_path: Path) -> None:
    store = TimingCacheStore(tmp_path / "store")
    work = tmp_path / "work"
    work.mkdir()
    first = store.checkout(A10, work)
    assert not first.reused and "no timing cache yet" in first.note
    entry = store.commit(A10, produced(tmp_path, b"tactics" * 100))
    assert entry is not None and entry.size_bytes == 700
    again = store.checkout(A10, work)
    assert again.reused and again.path.read_bytes() == b"tactics" * 100
    assert not store.checkout(H100, work).reused  # C8: never another GPU's cache
    assert [e.key for e in store.entries()] == [A10]


def test_corrupt_cache_is_reported_and_dropped(tmp_path: Path) -> None:
    store = TimingCacheStore(tmp_path)
    store.commit(A10, produced(tmp_path, b"good bytes"))
    (tmp_path / f"{A10.slug}.cache").write_bytes(b"half")
    result = store.checkout(A10, tmp_path)
    assert not result.reused and "corrupt (sha256 differs" in result.note
    assert not (tmp_path / f"{A10.slug}.cache").exists() and store.entries() == []


def test_foreign_record_is_never_handed_to_trtexec(tmp_path: Path) -> None:
    store = TimingCacheStore(tmp_path)
    store.commit(H100, produced(tmp_path, b"hopper"))
    (tmp_path / f"{H100.slug}.cache").rename(tmp_path / f"{A10.slug}.cache")
    (tmp_path / f"{H100.slug}.json").rename(tmp_path / f"{A10.slug}.json")
    result = store.checkout(A10, tmp_path)
    assert not result.reused and "was made for" in result.note


def test_empty_output_is_not_stored(tmp_path: Path) -> None:
    store = TimingCacheStore(tmp_path)
    assert store.commit(A10, produced(tmp_path, b"")) is None
    assert store.commit(A10, tmp_path / "missing.cache") is None


def _commit_many(root: str, tag: int) -> None:
    store = TimingCacheStore(Path(root))
    for round_ in range(20):
        source = Path(root).parent / f"src-{tag}-{round_}.cache"
        source.write_bytes(bytes([tag]) * (1000 + tag))
        store.commit(A10, source)


def test_concurrent_commits_from_two_processes_leave_one_whole_cache(tmp_path: Path) -> None:
    root = tmp_path / "store"
    workers = [
        multiprocessing.get_context("spawn").Process(target=_commit_many, args=(str(root), tag))
        for tag in (1, 2)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(300)  # generous: spawn re-imports numpy on a loaded 2-core machine
        assert worker.exitcode == 0, f"worker exit code {worker.exitcode} (None = still running)"
    data = (root / f"{A10.slug}.cache").read_bytes()
    assert data in (bytes([1]) * 1001, bytes([2]) * 1002)
    assert TimingCacheStore(root).checkout(A10, tmp_path).reused  # record matches bytes
    assert not list(root.glob(".*.tmp"))


def test_cli_ls_export_import_prune(tmp_path: Path) -> None:
    source = TimingCacheStore(tmp_path / "a")
    source.commit(A10, produced(tmp_path, b"x" * 64))
    source.commit(H100, produced(tmp_path, b"y" * 32))
    runner = CliRunner()
    listed = runner.invoke(command, ["--cache-dir", str(tmp_path / "a"), "ls", "--json"])
    rows = json.loads(listed.output)
    assert [(r["name"], r["size_bytes"]) for r in rows] == [
        ("trt10.13.2-sm86-nvidia-a10", 64),
        ("trt10.13.2-sm90-nvidia-h100-pcie", 32),
    ]
    archive = tmp_path / "caches.tar.gz"
    assert (
        runner.invoke(
            command, ["--cache-dir", str(tmp_path / "a"), "export", str(archive)]
        ).exit_code
        == 0
    )
    imported = runner.invoke(command, ["--cache-dir", str(tmp_path / "b"), "import", str(archive)])
    assert imported.exit_code == 0, imported.output
    assert TimingCacheStore(tmp_path / "b").checkout(A10, tmp_path).path.read_bytes() == b"x" * 64
    pruned = runner.invoke(command, ["--cache-dir", str(tmp_path / "b"), "prune", "--all"])
    assert pruned.exit_code == 0 and TimingCacheStore(tmp_path / "b").entries() == []


def test_cli_import_skips_a_tampered_pair(tmp_path: Path) -> None:
    archive = tmp_path / "bad.tar.gz"
    record = {
        "key": {
            "tensorrt_version": "10.13.2",
            "compute_capability": "8.6",
            "gpu_name": "NVIDIA A10",
        },
        "size_bytes": 3,
        "sha256": "sha256:00",
        "updated": "2026-01-01T00:00:00+00:00",
    }
    for name, data in (("k.json", json.dumps(record).encode()), ("k.cache", b"abc")):
        (tmp_path / name).write_bytes(data)
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "k.json", arcname="../../k.json")
        tar.add(tmp_path / "k.cache", arcname="k.cache")
    result = CliRunner().invoke(
        command, ["--cache-dir", str(tmp_path / "c"), "import", str(archive)]
    )
    assert "skipped k: trt10.13.2-sm86-nvidia-a10: bytes do not match" in result.output
    assert TimingCacheStore(tmp_path / "c").entries() == []
    assert not (tmp_path.parent / "k.json").exists()


def test_prune_needs_a_choice(tmp_path: Path) -> None:
    result = CliRunner().invoke(command, ["--cache-dir", str(tmp_path), "prune"])
    assert result.exit_code != 0 and "--older-than DAYS or --all" in str(result.exception)
