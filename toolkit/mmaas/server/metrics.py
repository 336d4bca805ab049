"""Inference statistics, exposed as Prometheus metrics with Triton's names and as KServe v2
/ Triton ``ModelStatistics``.

Prometheus (text format on ``MMAAS_METRICS_PORT``, path ``/metrics``), one sample per
model of the repository, labels ``model`` and ``version``; counters are cumulative,
durations in microseconds, exactly as Triton names them so existing dashboards work:

- ``nv_inference_request_success``, ``nv_inference_request_failure`` (+ ``reason``:
  REJECTED = refused request, CANCELED, BACKEND = the engine failed, OTHER)
- ``nv_inference_count`` (inferences = batch rows), ``nv_inference_exec_count`` (engine runs)
- ``nv_inference_request_duration_us``, ``nv_inference_queue_duration_us``,
  ``nv_inference_compute_input_duration_us``, ``nv_inference_compute_infer_duration_us``,
  ``nv_inference_compute_output_duration_us``
- gauge ``nv_inference_pending_request_count`` (queued requests)

and mmaas's own: gauge ``mmaas_inflight_requests``, histogram ``mmaas_batch_size`` (rows
per engine run). Counters are written on the event loop and read by the HTTP thread
under one lock. The text is written here rather than by prometheus-client, whose
exposition renames every counter family to ``<name>_total`` (Triton's are not).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from mmaas.server.cpu_metrics import format_value

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)
FAILURE_REASONS = ("REJECTED", "CANCELED", "BACKEND", "OTHER")
Sample = tuple[str, dict[str, str], float]  # (name suffix, extra labels, value)
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


def exposition(models: Sequence[ModelMetrics]) -> str:
    """Every metric of every model in the Prometheus text format 0.0.4, Triton's names
    verbatim (counters carry no ``_total`` suffix, as Triton exposes them); each family
    once, with one sample per model (labels ``model``, ``version``)."""
    data = [(model.labels, model.snapshot()) for model in models]
    lines: list[str] = []

    def add(
        name: str, kind: str, doc: str, samples: Callable[[dict[str, Any]], list[Sample]]
    ) -> None:
        lines.extend([f"# HELP {name} {doc}", f"# TYPE {name} {kind}"])
        for labels, snapshot in data:
            for suffix, extra, value in samples(snapshot):
                text = ",".join(f'{k}="{escape_label(v)}"' for k, v in {**labels, **extra}.items())
                lines.append(f"{name}{suffix}{{{text}}} {format_value(value)}")

    def one(key: str) -> Callable[[dict[str, Any]], list[Sample]]:
        return lambda d: [("", {}, d[key])]

    add("nv_inference_request_success", "counter", "Successful requests", one("success"))
    add(
        "nv_inference_request_failure",
        "counter",
        "Failed requests",
        lambda d: [("", {"reason": r}, d["failures"].get(r, 0)) for r in FAILURE_REASONS],
    )
    add(
        "nv_inference_count",
        "counter",
        "Inferences (batch rows) performed",
        one("inference_count"),
    )
    add("nv_inference_exec_count", "counter", "Engine executions (batches)", one("execution_count"))
    for part in DURATIONS:
        add(
            f"nv_inference_{part}_duration_us",
            "counter",
            f"Cumulative {part.replace('_', ' ')} duration in microseconds",
            _duration(part),
        )
    add(
        "nv_inference_pending_request_count",
        "gauge",
        "Requests queued for an engine instance",
        one("pending"),
    )
    add(
        "mmaas_inflight_requests",
        "gauge",
        "Requests being handled (queued or computing)",
        one("inflight"),
    )
    add(
        "mmaas_batch_size",
        "histogram",
        "Rows per engine execution",
        lambda d: _batch_histogram(d["batches"]),
    )
    return "\n".join(lines) + "\n"


def serve_http(
    host: str,
    port: int,
    models: Callable[[], Sequence[ModelMetrics]],
    families: Sequence[Callable[[], list[str]]] = (),
) -> ThreadingHTTPServer:
    """Serve ``GET /metrics`` (:func:`exposition` of ``models()``, read at each scrape,
    then the lines of each of ``families``, e.g. :class:`~.cpu_metrics.CpuMetrics`) on
    ``host:port`` from a daemon thread; returns the HTTP server (``shutdown()`` stops it).
    Raises OSError when the port is taken."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404, "only /metrics is served here")
                return
            extra = [line for family in families for line in family()]
            body = (exposition(models()) + "".join(f"{line}\n" for line in extra)).encode()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return  # scrapes are not worth a log line each

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="mmaas-metrics", daemon=True).start()
    return server


def _duration(part: str) -> Callable[[dict[str, Any]], list[Sample]]:
    return lambda data: [("", {}, data["duration_ns"].get(part, 0) // 1000)]


def _batch_histogram(batches: dict[int, list[int]]) -> list[Sample]:
    total = sum(v[0] for v in batches.values())
    samples: list[Sample] = [
        ("_bucket", {"le": str(bound)}, sum(v[0] for size, v in batches.items() if size <= bound))
        for bound in BATCH_BUCKETS
    ]
    samples += [
        ("_bucket", {"le": "+Inf"}, total),
        ("_sum", {}, sum(size * v[0] for size, v in batches.items())),
        ("_count", {}, total),
    ]
    return samples


def escape_label(value: str) -> str:
    """A label value escaped for the text format (backslash, double quote, newline)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
