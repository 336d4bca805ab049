"""Inference statistics, exposed as Prometheus metrics with Triton's names and as KServe v2
/ Triton ``ModelStatistics``.

Prometheus (text format on ``MMAAS_METRICS_PORT``, path ``/metrics``), labels
``model`` and ``version``; counters are cumulative, durations in microseconds, exactly
as Triton names them so existing dashboards work:

- ``nv_inference_request_success``, ``nv_inference_request_failure`` (+ ``reason``:
  REJECTED = refused request, CANCELED, BACKEND = the engine failed, OTHER)
- ``nv_inference_count`` (inferences = batch rows), ``nv_inference_exec_count`` (engine runs)
- ``nv_inference_request_duration_us``, ``nv_inference_queue_duration_us``,
  ``nv_inference_compute_input_duration_us``, ``nv_inference_compute_infer_duration_us``,
  ``nv_inference_compute_output_duration_us``
- gauge ``nv_inference_pending_request_count`` (queued requests)

and mmaas's own: gauge ``mmaas_inflight_requests``, histogram ``mmaas_batch_size`` (rows
per engine run). Counters are written on the event loop and read by the HTTP thread
under one lock.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric

BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)
FAILURE_REASONS = ("REJECTED", "CANCELED", "BACKEND", "OTHER")
DURATIONS = ("request", "queue", "compute_input", "compute_infer", "compute_output")


@dataclass(frozen=True)
class Execution:
    """One engine run: ``requests`` stacked into ``batch_size`` rows; stack (input),
    run (infer) and split (output) times in ns."""

    requests: int
    batch_size: int
    input_ns: int
    infer_ns: int
    output_ns: int


class ModelMetrics:
    """Cumulative statistics of one served model (name, version)."""

    def __init__(self, model: str, version: str) -> None:
        self.labels = {"model": model, "version": version}
        self.lock = threading.Lock()
        self.success = 0
        self.failures: Counter[str] = Counter()
        self.inference_count = 0
        self.execution_count = 0
        self.duration_ns: Counter[str] = Counter()
        self.batches: dict[int, list[int]] = {}  # size -> [count, input_ns, infer_ns, output_ns]
        self.pending = 0
        self.inflight = 0
        self.last_inference_ms = 0

    def request_started(self) -> None:
        """One more request in flight."""
        with self.lock:
            self.inflight += 1

    def request_finished(self, duration_ns: int, failure: str | None = None) -> None:
        """A request ended after ``duration_ns``; ``failure`` is one of
        :data:`FAILURE_REASONS`, None on success."""
        with self.lock:
            self.inflight -= 1
            if failure is None:
                self.success += 1
                self.duration_ns["request"] += duration_ns
            else:
                self.failures[failure] += 1

    def set_pending(self, count: int) -> None:
        """The queue now holds ``count`` requests."""
        self.pending = count

    def record_execution(self, run: Execution, queue_ns: list[int]) -> None:
        """One engine run served the requests whose queue times are ``queue_ns``; each of
        them is charged the run's compute times, as Triton does."""
        with self.lock:
            self.inference_count += run.batch_size
            self.execution_count += 1
            self.last_inference_ms = int(time.time() * 1000)
            self.duration_ns["queue"] += sum(queue_ns)
            self.duration_ns["compute_input"] += run.input_ns * run.requests
            self.duration_ns["compute_infer"] += run.infer_ns * run.requests
            self.duration_ns["compute_output"] += run.output_ns * run.requests
            entry = self.batches.setdefault(run.batch_size, [0, 0, 0, 0])
            for index, value in enumerate((1, run.input_ns, run.infer_ns, run.output_ns)):
                entry[index] += value

    def snapshot(self) -> dict[str, Any]:
        """A consistent copy of every counter (for ModelStatistics and the collector)."""
        with self.lock:
            return {
                "success": self.success,
                "failures": dict(self.failures),
                "inference_count": self.inference_count,
                "execution_count": self.execution_count,
                "duration_ns": dict(self.duration_ns),
                "batches": {size: list(v) for size, v in self.batches.items()},
                "pending": self.pending,
                "inflight": self.inflight,
                "last_inference_ms": self.last_inference_ms,
            }

    def collect(self) -> Iterator[Metric]:
        """Prometheus collector protocol: yield every metric family."""
        data, names, values = self.snapshot(), list(self.labels), list(self.labels.values())
        yield _counter(
            "nv_inference_request_success",
            "Successful requests",
            names,
            [(values, data["success"])],
        )
        yield _counter(
            "nv_inference_request_failure",
            "Failed requests",
            [*names, "reason"],
            [([*values, r], data["failures"].get(r, 0)) for r in FAILURE_REASONS],
        )
        yield _counter(
            "nv_inference_count",
            "Inferences (batch rows) performed",
            names,
            [(values, data["inference_count"])],
        )
        yield _counter(
            "nv_inference_exec_count",
            "Engine executions (batches) performed",
            names,
            [(values, data["execution_count"])],
        )
        for part in DURATIONS:
            yield _counter(
                f"nv_inference_{part}_duration_us",
                f"Cumulative {part.replace('_', ' ')} duration in microseconds",
                names,
                [(values, data["duration_ns"].get(part, 0) // 1000)],
            )
        pending = GaugeMetricFamily(
            "nv_inference_pending_request_count",
            "Requests queued for an engine instance",
            labels=names,
        )
        pending.add_metric(values, data["pending"])
        yield pending
        inflight = GaugeMetricFamily(
            "mmaas_inflight_requests", "Requests being handled (queued or computing)", labels=names
        )
        inflight.add_metric(values, data["inflight"])
        yield inflight
        yield _batch_histogram(names, values, data["batches"])

    def serve_http(self, host: str, port: int) -> Any:
        """Serve ``/metrics`` on ``host:port`` in a daemon thread; returns the HTTP server
        (call ``shutdown()`` to stop it). Raises OSError when the port is taken."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)  # type: ignore[arg-type]
        server, _thread = start_http_server(port, addr=host, registry=registry)
        return server


def _counter(
    name: str, doc: str, labels: list[str], samples: list[tuple[list[str], float]]
) -> Metric:
    """A counter family whose samples keep Triton's exact names (no ``_total`` suffix)."""
    family = Metric(name, doc, "counter")
    for label_values, value in samples:
        family.add_sample(name, dict(zip(labels, label_values, strict=True)), value)
    return family


def _batch_histogram(labels: list[str], values: list[str], batches: dict[int, list[int]]) -> Metric:
    family = HistogramMetricFamily("mmaas_batch_size", "Rows per engine execution", labels=labels)
    buckets = [
        (str(bound), sum(v[0] for size, v in batches.items() if size <= bound))
        for bound in BATCH_BUCKETS
    ]
    total = sum(v[0] for v in batches.values())
    buckets.append(("+Inf", total))
    family.add_metric(values, buckets, sum_value=sum(size * v[0] for size, v in batches.items()))
    return family
