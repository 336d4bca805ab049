"""Parse trtexec's console output into a frozen :class:`TrtexecLog` for the build report.

Format (TensorRT 8.x-11.x, ``samples/trtexec`` and ``sampleReporting.cpp``): a
``&&&& RUNNING TensorRT.trtexec [TensorRT v101401] [b48] # <command>`` banner, then lines
``[MM/DD/YYYY-HH:MM:SS] [I|W|E|V] text`` (``[E]`` text may continue on unprefixed lines,
e.g. an ONNX node dump), and a final ``&&&& PASSED`` / ``&&&& FAILED`` banner. The version
tag is ``vMmPP`` on 8.x (``v8203`` = 8.2.3) and ``vMMmmPP`` from 9.x on (``v101401`` =
10.14.1). The outcome comes from the exit code first (11.x can fail an argument parse
without printing ``&&&& FAILED``), then from the banner. Times in the performance summary
are milliseconds, throughput is queries per second.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from mmaas.backends.tensorrt.builder.trtexec.profile import (
    ProfileShapes,
    ShapeOverride,
    profile_fact,
)
from mmaas.backends.tensorrt.runtime.releases import BANNER, tensorrt_version_from_tag

LINE = re.compile(r"^\[\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d\] \[([IWEV])\] (.*)$")
STAT_NAMES = {
    "Latency": "latency",
    "GPU Compute Time": "gpu_compute",
    "Enqueue Time": "enqueue",
    "H2D Latency": "h2d",
    "D2H Latency": "d2h",
}
STAT_LINE = re.compile(r"^(" + "|".join(STAT_NAMES) + r"): (min = .*)$")
STAT_FIELD = re.compile(r"(min|max|mean|median) = ([-+.\deE]+) ms")
PERCENTILE = re.compile(r"percentile\(([\d.]+)%\) = ([-+.\deE]+) ms")
OLD_PERCENTILE = re.compile(r"percentile: ([-+.\deE]+) ms at ([\d.]+)%")
SCALARS = {
    "throughput_qps": re.compile(r"^Throughput: ([-+.\deE]+) qps"),
    "build_time_s": re.compile(r"^Engine built in ([-+.\deE]+) sec\."),
    "engine_size_mib": re.compile(r"^Created engine with size: ([-+.\deE]+) MiB"),
    "workspace_mib": re.compile(r"^Memory Pools: workspace: ([-+.\deE]+) MiB"),
}
CACHE_LOADED = re.compile(r"Loaded (\d+) bytes of timing cache from (.+)$")
CACHE_SAVED = re.compile(r"Saved (\d+) bytes of timing cache to (.+)$")
CACHE_UNREADABLE = re.compile(
    r"Could not read (?:timing )?cache from: (.+?)\. A new (?:timing )?cache will be generated"
)
# A [W]/[E] line saying TensorRT refused the timing cache it was given: the blob's header
# (TensorRT's serializer: "Serialization assertion magicTagRead == kMAGIC_TAG failed.Magic
# tag does not match"), or a cache of another TensorRT release or device. trtexec then
# builds with an empty cache, so nothing was reused.
CACHE_REJECTED = re.compile(
    r"magic tag does not match|serialization assertion|timing ?cache\b.*\b(?:mismatch|"
    r"incompatible|invalid|corrupt|different|ignored|discarded|cannot be used|not be used|"
    r"creation failed|failed)",
    re.IGNORECASE,
)
CACHE_MODE = re.compile(r"(Global|Local) timing cache in use")
SKIPPED = "Skipped inference phase since --skipInference is added."


@dataclass(frozen=True)
class Stats:
    """One timing line of the performance summary, in milliseconds.

    Attributes:
        percentiles: ``(percent, ms)`` pairs as printed, e.g. ``((90.0, 9.88), (99.0, 9.96))``.
    """

    min_ms: float
    max_ms: float
    mean_ms: float
    median_ms: float
    percentiles: tuple[tuple[float, float], ...] = ()


@dataclass(frozen=True)
class TimingCacheEvents:
    """What trtexec said about ``--timingCacheFile``: bytes loaded/saved (None if not
    said), whether the file could not be read, ``global``/``local`` cache mode, and the
    first [W]/[E] line refusing the cache it loaded (``rejected``; None if none)."""

    loaded_bytes: int | None = None
    saved_bytes: int | None = None
    path: str | None = None
    unreadable: bool = False
    mode: str | None = None
    rejected: str | None = None


@dataclass(frozen=True)
class TrtexecLog:
    """The parsed facts of one trtexec run (None where the log does not say).

    Attributes:
        outcome: ``"passed"`` or ``"failed"``.
        exit_code: the process exit status, when known.
        banner: ``PASSED`` / ``FAILED`` from the final ``&&&&`` line, or None.
        tensorrt_version: ``"10.14.1"`` from the ``[TensorRT vNNNNNN]`` tag.
        tensorrt_build: ``"b48"`` where printed (10.x).
        command: the command line echoed after ``#``.
        build_time_s: ``Engine built in N sec.``; engine_size_mib: ``Created engine with
            size``; workspace_mib: the workspace pool trtexec reports (None = default).
        throughput_qps: performance summary throughput; latency, gpu_compute, enqueue,
            h2d, d2h: its timing lines.
        skipped_inference: the run was build-only (``--skipInference``).
        profile: every input's shapes per optimization profile, as the builder got them
            and as the options echo says (:mod:`mmaas.backends.tensorrt.builder.trtexec.profile`).
        shape_overrides: inputs trtexec pinned because it got no shapes for them.
        errors: ``[E]`` messages (with their continuation lines), in order.
    """

    outcome: str
    exit_code: int | None = None
    banner: str | None = None
    tensorrt_version: str | None = None
    tensorrt_build: str | None = None
    command: str | None = None
    build_time_s: float | None = None
    engine_size_mib: float | None = None
    workspace_mib: float | None = None
    throughput_qps: float | None = None
    latency: Stats | None = None
    gpu_compute: Stats | None = None
    enqueue: Stats | None = None
    h2d: Stats | None = None
    d2h: Stats | None = None
    timing_cache: TimingCacheEvents = field(default_factory=TimingCacheEvents)
    skipped_inference: bool = False
    profile: tuple[ProfileShapes, ...] = ()
    shape_overrides: tuple[ShapeOverride, ...] = ()
    errors: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        """True when the run succeeded."""
        return self.outcome == "passed"

    def why(self) -> str:
        """One paragraph saying why a failed run failed (the ``[E]`` text), or, when the
        log has none, that trtexec's stderr (where it writes ``[W]``/``[E]``) may not have
        been captured."""
        if self.errors:
            return "\n".join(self.errors)
        code = f"exit code {self.exit_code}" if self.exit_code is not None else "no exit code"
        return (
            f"trtexec failed ({code}, banner {self.banner or 'missing'}) without an [E] "
            "line: its stderr, where trtexec writes [W]/[E] messages, may not have been "
            "captured; rerun with stderr redirected to the log (2>&1)"
        )

    def to_report(self) -> dict[str, Any]:
        """JSON-ready dict for ``report.json`` (durations ms/s as named)."""
        return asdict(self)


def parse_trtexec_log(text: str, exit_code: int | None = None) -> TrtexecLog:
    """Parse trtexec console output (stdout and stderr interleaved, or either alone).

    Args:
        text: the whole output; a log without a trailing newline is fine.
        exit_code: the process exit status when known; it decides the outcome first.
    """
    facts: dict[str, Any] = {}
    cache: dict[str, Any] = {}
    errors: list[str] = []
    shapes: list[ProfileShapes] = []
    overrides: list[ShapeOverride] = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if _banner(line, facts):
            continue
        match = LINE.match(line)
        if match is None:
            if errors and line and not line.startswith("&&&&"):
                errors[-1] += "\n" + line
            continue
        level, message = match.groups()
        if level == "E":
            errors.append(message)
        if level in "WE" and _rejection(message, cache):
            continue
        if not profile_fact(message.removeprefix("[TRT] "), shapes, overrides):
            _fact(message, facts, cache)
    banner = facts.pop("banner", None)
    return TrtexecLog(
        outcome=_outcome(exit_code, banner),
        exit_code=exit_code,
        banner=banner,
        timing_cache=TimingCacheEvents(**cache),
        profile=tuple(shapes),
        shape_overrides=tuple(overrides),
        errors=tuple(errors),
        **facts,
    )


def _banner(line: str, facts: dict[str, Any]) -> bool:
    match = BANNER.match(line)
    if match is None:
        return False
    state, tag, build, command = match.groups()
    facts.update(
        tensorrt_version=tensorrt_version_from_tag(tag), tensorrt_build=build, command=command
    )
    if state != "RUNNING":
        facts["banner"] = state
    return True


def _fact(message: str, facts: dict[str, Any], cache: dict[str, Any]) -> None:
    text = message.removeprefix("[TRT] ")
    for key, pattern in SCALARS.items():
        if found := pattern.match(text):
            facts[key] = float(found.group(1))
            return
    if found := STAT_LINE.match(text):
        facts[STAT_NAMES[found.group(1)]] = _stats(found.group(2))
    elif text == SKIPPED:
        facts["skipped_inference"] = True
    else:
        _cache_fact(text, cache)


def _rejection(message: str, cache: dict[str, Any]) -> bool:
    if CACHE_UNREADABLE.search(message) or not CACHE_REJECTED.search(message):
        return False
    cache.setdefault("rejected", message.removeprefix("[TRT] "))
    return True


def _cache_fact(text: str, cache: dict[str, Any]) -> None:
    if found := CACHE_LOADED.search(text):
        cache.update(loaded_bytes=int(found.group(1)), path=found.group(2))
    elif found := CACHE_SAVED.search(text):
        cache.update(saved_bytes=int(found.group(1)), path=found.group(2))
    elif found := CACHE_UNREADABLE.search(text):
        cache.update(unreadable=True, path=cache.get("path") or found.group(1))
    elif found := CACHE_MODE.search(text):
        cache["mode"] = found.group(1).lower()


def _stats(text: str) -> Stats:
    values = {name: float(value) for name, value in STAT_FIELD.findall(text)}
    percentiles = [(float(p), float(ms)) for p, ms in PERCENTILE.findall(text)]
    percentiles += [(float(p), float(ms)) for ms, p in OLD_PERCENTILE.findall(text)]
    return Stats(
        min_ms=values["min"],
        max_ms=values["max"],
        mean_ms=values["mean"],
        median_ms=values["median"],
        percentiles=tuple(percentiles),
    )


def _outcome(exit_code: int | None, banner: str | None) -> str:
    if exit_code is not None:
        return "passed" if exit_code == 0 and banner != "FAILED" else "failed"
    return "passed" if banner == "PASSED" else "failed"
