"""The timing-cache store and ``mmaas cache``: keys (C8), damaged caches, concurrent
commits from real processes, export/import/prune through the click group."""

from __future__ import annotations

import io
import json
import multiprocessing
import sys
import tarfile
from pathlib import Path

from click.testing import CliRunner

from mmaas.backends.tensorrt.builder.timing_cache import CacheKey, TimingCacheStore
from mmaas.cli.cache import command
from mmaas.core import proc
from mmaas.core.hashing import bytes_digest

A10 = CacheKey("10.13.2", "8.6", "NVIDIA A10")
H100 = CacheKey("10.13.2", "9.0", "NVIDIA H100 PCIe")
MMAAS = str(Path(sys.executable).with_name("mmaas"))


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
    entry = store.commit(A10, produced(tmp_path, b"tactics" * 100)).entry
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
    assert store.commit(A10, produced(tmp_path, b"")).entry is None
    assert store.commit(A10, tmp_path / "missing.cache").entry is None
    assert store.entries() == []


def test_a_commit_over_another_builds_cache_merges_it_when_it_can(tmp_path: Path) -> None:
    """Build 1 and build 2 check out the same cache; build 2 commits
    first. Build 1's commit sees the store moved on and merges instead of overwriting."""
    store = TimingCacheStore(tmp_path / "store")
    base = store.commit(A10, produced(tmp_path, b"base;")).entry
    assert base is not None
    store.commit(A10, produced(tmp_path, b"base;two;"), base=base.sha256)
    merged = store.commit(
        A10, produced(tmp_path, b"base;one;"), base=base.sha256, merge=lambda a, b: a + b[5:]
    )
    assert merged.contended and "merged this build's entries" in merged.note
    assert (tmp_path / "store" / f"{A10.slug}.cache").read_bytes() == b"base;two;one;"


def test_a_commit_over_another_builds_cache_says_which_won_without_a_merge(
    tmp_path: Path,
) -> None:
    store = TimingCacheStore(tmp_path / "store")
    base = store.commit(A10, produced(tmp_path, b"base;")).entry
    assert base is not None
    store.commit(A10, produced(tmp_path, b"base;two;"), base=base.sha256)
    for merge in (None, lambda a, b: None):  # no merge; a merge that cannot combine them
        won = store.commit(A10, produced(tmp_path, b"base;one;"), base=base.sha256, merge=merge)
        assert won.contended
        assert "another build stored trt10.13.2-sm86-nvidia-a10" in won.note
        assert "this build's cache replaced it (its entries are lost)" in won.note
    assert (tmp_path / "store" / f"{A10.slug}.cache").read_bytes() == b"base;one;"
    uncontended = store.commit(A10, produced(tmp_path, b"base;one;3"), base=won.entry.sha256)
    assert not uncontended.contended and uncontended.note.startswith("stored as")


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


def _export(tmp_path: Path, members: dict[str, bytes]) -> Path:
    archive = tmp_path / "export.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return archive


def _record(data: bytes, key: CacheKey = A10) -> bytes:
    return json.dumps(
        {
            "key": {
                "tensorrt_version": key.tensorrt_version,
                "compute_capability": key.compute_capability,
                "gpu_name": key.gpu_name,
            },
            "size_bytes": len(data),
            "sha256": bytes_digest(data),
            "updated": "2026-01-01T00:00:00+00:00",
        }
    ).encode()


def test_cli_import_of_a_corrupt_archive_exits_1_naming_each_bad_entry(tmp_path: Path) -> None:
    """One tampered pair, one half pair, one stray member (a traversal
    name) next to one good pair: nothing is imported, exit 1, every bad entry named."""
    good, tampered = b"good tactics", b"tampered"
    archive = _export(
        tmp_path,
        {
            f"{H100.slug}.json": _record(good, H100),
            f"{H100.slug}.cache": good,
            f"{A10.slug}.json": _record(b"original"),
            f"{A10.slug}.cache": tampered,
            "trt9.9-sm80-x.json": _record(b"lonely"),
            "../../escape.txt": b"x",
        },
    )
    store = tmp_path / "c"
    done = proc.run(
        [MMAAS, "cache", "--cache-dir", str(store), "import", str(archive)], check=False
    )
    assert done.returncode == 1, done.stderr
    assert f"{archive}: 3 bad entries, nothing imported:" in done.stderr
    assert f"  {A10.slug}.cache: bytes do not match the record (8 bytes" in done.stderr
    assert "  trt9.9-sm80-x.json: its trt9.9-sm80-x.cache is not in the archive" in done.stderr
    assert "  ../../escape.txt: not a timing-cache file of an export" in done.stderr
    assert "Traceback" not in done.stderr
    assert TimingCacheStore(store).entries() == []
    assert not (tmp_path.parent / "escape.txt").exists()


def test_cli_import_of_a_file_that_is_no_archive_exits_2(tmp_path: Path) -> None:
    archive = tmp_path / "junk.tar.gz"
    archive.write_bytes(b"\x1f\x8b not really gzip")
    done = proc.run([MMAAS, "cache", "import", str(archive)], check=False)
    assert done.returncode == 2 and "not a timing-cache export" in done.stderr


def test_prune_needs_a_choice(tmp_path: Path) -> None:
    result = CliRunner().invoke(command, ["--cache-dir", str(tmp_path), "prune"])
    assert result.exit_code != 0 and "--older-than DAYS or --all" in str(result.exception)
