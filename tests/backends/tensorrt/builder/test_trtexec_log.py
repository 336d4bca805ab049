"""The trtexec log parser on every real log in tests/fixtures/trtexec (copied from
shared/fixtures/trtexec; provenance in its README.md), asserting the values in each log."""

from __future__ import annotations

import pytest

from mmaas.backends.tensorrt.builder.trtexec.log import Stats, TrtexecLog, parse_trtexec_log
from mmaas.backends.tensorrt.runtime.releases import tensorrt_version_from_tag
from paths import FIXTURES

FIXTURES = FIXTURES / "trtexec"


def parsed(name: str, exit_code: int | None = None) -> TrtexecLog:
    return parse_trtexec_log((FIXTURES / name).read_text(), exit_code)


def test_every_fixture_log_is_covered_here() -> None:
    tested = {
        "trt10.13-pass-dynamic-bf16-excerpt.log",
        "trt10.14-pass-dynamic-fp16-timingcache-save-skipinference-verbose.log",
        "trt10.14-pass-implicit-dynamic-shape-override.log",
        "trt10.16-fail-onnx-parse-plugin-not-found.log",
        "trt10.16-pass-dynamic-2profiles-fp16-skipinference.log",
        "trt8.2-fail-dynamic-fp16-stdout-only.log",
        "trt8.4-pass-dynamic-fp16-verbose.log",
        "trt8.5-pass-dynamic-fp16.log",
        "trt8.5-pass-fp16-plugin.log",
    }
    assert {p.name for p in FIXTURES.glob("*.log")} == tested


def test_trt10_13_bf16_excerpt_performance_summary() -> None:
    log = parsed("trt10.13-pass-dynamic-bf16-excerpt.log")
    assert (log.outcome, log.banner, log.tensorrt_version, log.tensorrt_build) == (
        "passed",
        "PASSED",
        "10.13.0",
        "b35",
    )
    assert log.throughput_qps == 0.562059
    assert log.latency == Stats(
        1656.22, 1674.64, 1666.9, 1667.89, ((90.0, 1673.26), (95.0, 1674.64), (99.0, 1674.64))
    )
    assert log.gpu_compute == Stats(
        1655.52, 1673.94, 1666.2, 1667.19, ((90.0, 1672.56), (95.0, 1673.94), (99.0, 1673.94))
    )
    assert log.h2d is not None and log.h2d.mean_ms == 0.635217
    assert log.d2h is not None and log.d2h.max_ms == 0.0664062
    assert log.enqueue is not None and log.enqueue.median_ms == 1663.63
    assert log.build_time_s is None and "--bf16" in (log.command or "")


def test_trt10_14_timing_cache_save_build_only() -> None:
    log = parsed("trt10.14-pass-dynamic-fp16-timingcache-save-skipinference-verbose.log", 0)
    assert (log.outcome, log.tensorrt_version, log.tensorrt_build) == ("passed", "10.14.1", "b48")
    assert log.build_time_s == 13.8436 and log.engine_size_mib == 6.3747
    assert log.skipped_inference and log.throughput_qps is None and log.latency is None
    cache = log.timing_cache
    assert (cache.saved_bytes, cache.path, cache.unreadable, cache.mode, cache.loaded_bytes) == (
        107327,
        "model-trained.TimingCache",
        True,
        "global",
        None,
    )
    # `--memPoolSize=workspace:1024MiB` is 1024 *bytes* to this parser (suffix 'B'):
    assert log.workspace_mib == 0.000976562


def test_trt10_14_implicit_shape_override_run() -> None:
    log = parsed("trt10.14-pass-implicit-dynamic-shape-override.log")
    assert log.build_time_s == 2.60577 and log.engine_size_mib == 12.5724
    assert log.throughput_qps == 23188.6 and log.timing_cache.mode == "local"
    assert log.latency == Stats(
        0.0333252,
        0.26416,
        0.0385501,
        0.0383301,
        ((90.0, 0.0395508), (95.0, 0.0400391), (99.0, 0.046875)),
    )
    assert log.gpu_compute is not None and log.gpu_compute.percentiles[-1] == (99.0, 0.0368652)
    assert log.workspace_mib is None  # "workspace: default"


def test_trt10_16_parse_failure_says_why() -> None:
    log = parsed("trt10.16-fail-onnx-parse-plugin-not-found.log", 1)
    assert (log.outcome, log.banner, log.tensorrt_version) == ("failed", "FAILED", "10.16.0")
    assert len(log.errors) == 8
    assert log.errors[-4:] == (
        "Failed to parse onnx file",
        "Parsing model failed",
        "Failed to create engine from model or file.",
        "Engine set up failed",
    )
    assert "Plugin not found, are the plugin name, version, and namespace correct?" in log.why()
    assert 'op_type: "AddScalar"' in log.errors[1]  # the unprefixed node-dump lines


def test_trt10_16_two_profiles_build_only() -> None:
    log = parsed("trt10.16-pass-dynamic-2profiles-fp16-skipinference.log")
    assert (log.outcome, log.tensorrt_version, log.tensorrt_build) == ("passed", "10.16.1", "b11")
    assert log.build_time_s == 9.3282 and log.engine_size_mib == 12.6846
    assert log.skipped_inference and log.timing_cache.mode == "local"


def test_trt8_2_failure_without_error_text_blames_uncaptured_stderr() -> None:
    log = parsed("trt8.2-fail-dynamic-fp16-stdout-only.log")
    assert (log.outcome, log.tensorrt_version, log.errors) == ("failed", "8.2.3", ())
    assert "stderr" in log.why() and "may not have been captured" in log.why()
    assert log.build_time_s is None and log.latency is None


def test_trt8_4_verbose_run() -> None:
    log = parsed("trt8.4-pass-dynamic-fp16-verbose.log")
    assert (log.outcome, log.tensorrt_version, log.tensorrt_build) == ("passed", "8.4.1", None)
    assert (log.build_time_s, log.workspace_mib, log.throughput_qps) == (2.94838, 1024.0, 6175.47)
    assert log.latency == Stats(0.157104, 0.453369, 0.160819, 0.160095, ((99.0, 0.167969),))
    assert log.gpu_compute == Stats(0.151367, 0.446533, 0.154432, 0.153595, ((99.0, 0.159912),))


@pytest.mark.parametrize(
    ("name", "version", "build_s", "qps", "gpu_mean", "workspace"),
    [
        ("trt8.5-pass-dynamic-fp16.log", "8.5.0", 318.021, 135.689, 7.32218, None),
        ("trt8.5-pass-fp16-plugin.log", "8.5.2", 351.008, 196.933, 4.9113, 8192.0),
    ],
)
def test_trt8_5_runs(
    name: str, version: str, build_s: float, qps: float, gpu_mean: float, workspace: float | None
) -> None:
    log = parsed(name, 0)
    assert (log.outcome, log.tensorrt_version, log.build_time_s) == ("passed", version, build_s)
    assert log.throughput_qps == qps and log.workspace_mib == workspace
    assert log.gpu_compute is not None and log.gpu_compute.mean_ms == gpu_mean


def test_exit_code_decides_before_the_banner() -> None:
    """11.x can fail an argument parse without printing `&&&& FAILED`; a non-zero exit
    is a failure even after a PASSED banner."""
    unbannered = "&&&& RUNNING TensorRT.trtexec [TensorRT v110000] # trtexec --fp16\n"
    assert parse_trtexec_log(unbannered, 1).outcome == "failed"
    assert parse_trtexec_log(unbannered).outcome == "failed"
    passed = (FIXTURES / "trt8.5-pass-dynamic-fp16.log").read_text()
    assert parse_trtexec_log(passed, 139).outcome == "failed"


def test_timing_cache_load_line_as_trtexec_prints_it() -> None:
    """No fixture holds a cache load; the line is sampleUtils' `Loaded N bytes of timing
    cache from FILE`, logged at [I] (the text here is that format, not a real log)."""
    text = (
        "[04/25/2026-00:54:26] [I] [TRT] Loaded 107327 bytes of timing cache from c.cache\n"
        "&&&& PASSED TensorRT.trtexec [TensorRT v101401] [b48] # trtexec\n"
    )
    cache = parse_trtexec_log(text, 0).timing_cache
    assert (cache.loaded_bytes, cache.path, cache.unreadable) == (107327, "c.cache", False)


@pytest.mark.parametrize(
    ("tag", "version"),
    [
        ("8203", "8.2.3"),
        ("8401", "8.4.1"),
        ("8502", "8.5.2"),
        ("101300", "10.13.0"),
        ("101401", "10.14.1"),
        ("101601", "10.16.1"),
        ("90100", "9.1.0"),
    ],
)
def test_version_tags(tag: str, version: str) -> None:
    assert tensorrt_version_from_tag(tag) == version
