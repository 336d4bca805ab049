"""The Prometheus text: integers exact at any size, floats with every digit, Triton's
``nv_cpu_*`` gauges, and ``promtool check metrics`` (Debian's promtool, installed by
scripts/install_clients.sh) finding nothing but the naming warnings Triton shares; the
text also parses with prometheus_client, sample for sample."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from mmaas.server.cpu_metrics import CpuMetrics, format_value
from mmaas.server.metrics import Execution, ModelMetrics, exposition

from .conftest import RunningServer
from .grpc.helpers import infer_input

PROMTOOL = Path(sys.executable).parent / "promtool"
# The lint warnings Triton's own names draw (they are its names: dashboards use them).
TRITON_NAMING = re.compile(
    r'^\S+ (counter metrics should have "_total" suffix'
    r"|metric names should not contain abbreviated units"
    r'|non-histogram and non-summary metrics should not have "_count" suffix)$'
)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0"),
        (53067, "53067"),
        (367590123, "367590123"),
        (2**63 + 1, "9223372036854775809"),
        (0.1234567891234, "0.1234567891234"),
        (1.0, "1"),
        (1e20, "1e+20"),
        (float("inf"), "+Inf"),
        (float("nan"), "NaN"),
    ],
)
def test_values_are_printed_exactly(value: float, text: str) -> None:
    assert format_value(value) == text


def test_counters_past_a_million_keep_every_digit() -> None:
    metrics = ModelMetrics("m", "1")
    for _ in range(3):
        metrics.record_execution(Execution(1, 1, 0, 367_590_123_000, 0), [0])
    text = exposition([metrics])
    assert 'nv_inference_compute_infer_duration_us{model="m",version="1"} 1102770369' in text


def test_cpu_metrics_read_proc(tmp_path: Path) -> None:
    (tmp_path / "stat").write_text("cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 1 2 3\n")
    (tmp_path / "meminfo").write_text(
        "MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    250 kB\n"
    )
    cpu = CpuMetrics(tmp_path)
    assert cpu.utilization() == pytest.approx(0.2)  # since boot: 200 busy of 1000
    (tmp_path / "stat").write_text("cpu  150 0 150 900 0 0 0 0 0 0\n")
    assert cpu.utilization() == pytest.approx(0.5)  # 100 busy of 200 since the last read
    assert cpu.memory() == (1_024_000, 768_000)
    lines = cpu.exposition()
    assert "# TYPE nv_cpu_utilization gauge" in lines
    assert "nv_cpu_memory_total_bytes 1024000" in lines
    assert "nv_cpu_memory_used_bytes 768000" in lines


@pytest.fixture(scope="module")
def cls(module_server: Callable[..., RunningServer], cls_dir: Path) -> RunningServer:
    return module_server(cls_dir)


def test_promtool_finds_only_tritons_naming_warnings(cls: RunningServer) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    client = cls.client()
    for _ in range(3):
        client.infer("ppocr-cls", [infer_input("x", np.zeros((2, 3, 48, 192), np.float32), "FP32")])
    text = cls.metrics()
    done = subprocess.run(
        [str(PROMTOOL), "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    assert done.returncode in (0, 3), done.stdout + done.stderr  # 1 = not parseable
    problems = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert [p for p in problems if not TRITON_NAMING.match(p)] == [], problems
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert {"nv_cpu_utilization", "nv_cpu_memory_total_bytes", "nv_cpu_memory_used_bytes"} <= set(
        families
    )
    assert 0.0 <= families["nv_cpu_utilization"].samples[0].value <= 1.0
    assert families["nv_cpu_memory_total_bytes"].samples[0].value > 1e8
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert len(samples) == len(set(s.rpartition(" ")[0] for s in samples)), "a sample repeats"
    assert not [s for s in samples if "e+" in s.rpartition(" ")[2]], "a value in e-notation"
