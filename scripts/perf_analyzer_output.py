"""What the benchmarks read from perf_analyzer's report (Triton's load tool, 2.41-2.51):
client throughput and latency percentiles, and the server-side figures it reads back from
the statistics extension."""

from __future__ import annotations

import re
from typing import Any

PATTERNS = {
    "throughput": r"Throughput: ([\d.]+) infer/sec",
    "p50_us": r"p50 latency: (\d+) usec",
    "p99_us": r"p99 latency: (\d+) usec",
    "avg_us": r"Avg latency: (\d+) usec",
    "server_inference_count": r"Server:\s+Inference count: (\d+)",
    "server_request_us": r"Avg request latency: (\d+) usec",
    "server_queue_us": r"queue (\d+) usec",
    "server_compute_infer_us": r"compute infer (\d+) usec",
}


def figures(report: str) -> dict[str, Any]:
    """``{name: float or None}`` of :data:`PATTERNS` in perf_analyzer's output (the last
    measurement's when it printed several)."""
    found = {key: re.findall(pattern, report) for key, pattern in PATTERNS.items()}
    return {key: float(match[-1]) if match else None for key, match in found.items()}
