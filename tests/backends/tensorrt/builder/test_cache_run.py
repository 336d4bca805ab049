"""By contract: what a compile's report says about the timing cache comes
from trtexec's own log, and only a cache trtexec reports saving whole is stored.

The logs are the real 10.14 timing-cache run (tests/fixtures/trtexec), which starts without
a cache; the reuse and rejection variants each edit the one line that says what trtexec
did with the file (as TensorRT's ``loadTimingCacheFile`` and its serializer print them),
since no real log of a load was found (fixtures README)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mmaas.backends.tensorrt.builder.cache_run import CacheRun
from mmaas.backends.tensorrt.builder.timing_cache import CacheKey, TimingCacheStore
from mmaas.backends.tensorrt.builder.trtexec.log import parse_trtexec_log
from paths import FIXTURES

A10 = CacheKey("10.14.1", "8.6", "NVIDIA A10")
SAVED = 107327  # "Saved 107327 bytes of timing cache to ..." in the real log
REAL = (FIXTURES / "trtexec" / (
    "trt10.14-pass-dynamic-fp16-timingcache-save-skipinference-verbose.log"
)).read_text()  # fmt: skip
UNREAD = (
    "[W] [TRT] Could not read cache from: model-trained.TimingCache. "
    "A new cache will be generated and written."
)
LOADED = "[I] Loaded 4096 bytes of timing cache from trtexec/timing.cache"
MAGIC = (
    "[E] [TRT] 1: [stdArchiveReader.cpp::StdArchiveReader::32] Error Code 1: Serialization "
    "(Serialization assertion magicTagRead == kMAGIC_TAG failed.Magic tag does not match)"
)


def variant(*lines: str) -> str:
    """The real log with its first "Could not read cache" line replaced by ``lines``."""
    assert UNREAD in REAL
    return REAL.replace(UNREAD, "\n[04/25/2026-00:54:26] ".join(lines), 1)


def stored(tmp_path: Path, size: int = 4096) -> TimingCacheStore:
    store = TimingCacheStore(tmp_path / "store")
    seed = tmp_path / "seed.cache"
    seed.write_bytes(b"s" * size)
    store.commit(A10, seed)
    return store


def run(tmp_path: Path, log: str, written: int | None = SAVED, enabled: bool = True) -> dict:
    work = tmp_path / "engine" / "trtexec"
    work.mkdir(parents=True, exist_ok=True)
    cache = CacheRun(enabled, False, tmp_path / "store", A10, work)
    if written is not None:
        cache.path.write_bytes(b"n" * written)  # what trtexec wrote back
    return cache.finish(parse_trtexec_log(log, 0))


def test_contract_first_build_stores_the_cache_trtexec_saved(tmp_path: Path) -> None:
    report = run(tmp_path, REAL)
    assert (report["status"], report["reused"], report["stored_bytes"]) == ("new", False, SAVED)
    assert report["warnings"] == [] and TimingCacheStore(tmp_path / "store").entries()


def test_contract_reused_only_when_trtexec_loaded_the_stored_bytes(tmp_path: Path) -> None:
    stored(tmp_path)
    report = run(tmp_path, variant(LOADED))
    assert (report["status"], report["reused"], report["rejected"]) == ("reused", True, None)
    assert report["warnings"] == []


def test_contract_rejected_cache_is_reported_warned_and_replaced(tmp_path: Path) -> None:
    store = stored(tmp_path)
    report = run(tmp_path, variant(LOADED, MAGIC))
    assert (report["status"], report["reused"]) == ("rejected", False)
    assert report["rejected"].endswith("Magic tag does not match)")
    assert report["warnings"] == [
        f"trtexec rejected the stored timing cache {A10.slug} ({report['rejected']}); this "
        "engine was built without it (every tactic timed again)"
    ]
    assert [e.size_bytes for e in store.entries()] == [SAVED]  # trtexec's fresh, valid one


def test_contract_rejected_cache_is_dropped_when_trtexec_wrote_no_valid_one(
    tmp_path: Path,
) -> None:
    store = stored(tmp_path)
    report = run(tmp_path, variant(LOADED, MAGIC), written=SAVED - 1)  # truncated write
    assert (report["status"], report["stored_bytes"]) == ("rejected", None)
    assert f"trtexec reported saving {SAVED} bytes, the file holds {SAVED - 1}" in " ".join(
        report["notes"]
    )
    assert store.entries() == []


@pytest.mark.parametrize(
    "line",
    [
        "[W] [TRT] The timing cache was created by another TensorRT version; it is ignored",
        "[E] TimingCache creation failed",
    ],
)
def test_contract_other_refusals_of_the_cache_count_as_rejected(tmp_path: Path, line) -> None:
    stored(tmp_path)
    assert run(tmp_path, variant(LOADED, line))["status"] == "rejected"


def test_contract_a_cache_trtexec_never_said_it_loaded_is_not_counted_reused(
    tmp_path: Path,
) -> None:
    stored(tmp_path)
    report = run(tmp_path, variant("[I] nothing about the cache"))
    assert (report["status"], report["reused"]) == ("not-loaded", False)
    assert "did not report loading the stored timing cache" in report["warnings"][0]


def test_contract_nothing_stored_without_trtexecs_save_line(tmp_path: Path) -> None:
    log = REAL.replace("Saved 107327 bytes of timing cache to", "Wrote it to")
    report = run(tmp_path, log)
    assert report["stored_bytes"] is None
    assert TimingCacheStore(tmp_path / "store").entries() == []


def test_off(tmp_path: Path) -> None:
    assert run(tmp_path, REAL, enabled=False) == {
        "enabled": False,
        "status": "off",
        "reused": False,
    }
