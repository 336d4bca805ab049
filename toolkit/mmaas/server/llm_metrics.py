"""Generation (LLM) metrics of a served model, beside Triton's, in the Prometheus text format
(labels ``model`` and ``version``, as Triton's); the families of Triton's vLLM back end, with
mmaas's prefix and Prometheus' base units:

- histogram ``mmaas_time_to_first_token_seconds``: from a request's arrival at the server to
  its first token (preprocessing, queueing and prefill included);
- histogram ``mmaas_inter_token_latency_seconds``: between consecutive tokens of a request;
- gauges ``mmaas_num_requests_running`` (holding a KV-cache slot) and
  ``mmaas_num_requests_waiting`` (queued for one);
- gauges ``mmaas_kv_cache_usage_ratio`` (slots held / slots, 0-1) and
  ``mmaas_kv_cache_slots`` (slots given out at most).

A model's executor that generates exposes a :class:`GenerationMetrics` as its
``generation_metrics`` attribute; :func:`generation_lines` writes every such model's
samples, each family once. Written from the engine thread, read by the metrics thread under
one lock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mmaas.server.cpu_metrics import format_value
from mmaas.server.metrics import escape_label

TTFT_BUCKETS = (0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0)
ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0)


@dataclass
class Histogram:
    """Cumulative counts per upper bound (seconds), their sum and count."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * len(self.bounds)

    def observe(self, value: float) -> None:
        """Count one observation."""
        for index, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[index] += 1
        self.total += value
        self.count += 1

    def samples(self) -> list[tuple[str, dict[str, str], float]]:
        """(suffix, extra labels, value) of ``_bucket`` (le ...), ``_sum``, ``_count``."""
        rows = [("_bucket", {"le": format_value(b)}, float(c))
                for b, c in zip(self.bounds, self.counts, strict=True)]  # fmt: skip
        return [*rows, ("_bucket", {"le": "+Inf"}, self.count), ("_sum", {}, self.total),
                ("_count", {}, self.count)]  # fmt: skip


class GenerationMetrics:
    """The generation metrics of one served model (module docstring)."""

    def __init__(self, labels: dict[str, str]) -> None:
        self.labels = dict(labels)
        self.lock = threading.Lock()
        self.ttft = Histogram(TTFT_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)
        self.running = self.waiting = self.slots_used = self.slots = 0

    def first_token(self, seconds: float) -> None:
        """A request's first token came out ``seconds`` after it arrived."""
        with self.lock:
            self.ttft.observe(seconds)

    def inter_token(self, seconds: float) -> None:
        """A request's next token came out ``seconds`` after its previous one."""
        with self.lock:
            self.itl.observe(seconds)

    def set_sequences(self, running: int, waiting: int, used: int, slots: int) -> None:
        """Requests holding a slot, requests waiting, slots held and slots in all."""
        with self.lock:
            self.running, self.waiting, self.slots_used, self.slots = running, waiting, used, slots

    def families(self) -> dict[str, list[tuple[str, dict[str, str], float]]]:
        """Family name -> its samples (suffix, extra labels, value), a consistent copy."""
        with self.lock:
            usage = self.slots_used / self.slots if self.slots else 0.0
            return {
                "mmaas_time_to_first_token_seconds": self.ttft.samples(),
                "mmaas_inter_token_latency_seconds": self.itl.samples(),
                "mmaas_num_requests_running": [("", {}, self.running)],
                "mmaas_num_requests_waiting": [("", {}, self.waiting)],
                "mmaas_kv_cache_usage_ratio": [("", {}, usage)],
                "mmaas_kv_cache_slots": [("", {}, self.slots)],
            }


FAMILIES = {
    "mmaas_time_to_first_token_seconds": (
        "histogram", "Seconds from a request's arrival to its first generated token"),
    "mmaas_inter_token_latency_seconds": (
        "histogram", "Seconds between consecutive generated tokens of a request"),
    "mmaas_num_requests_running": ("gauge", "Generation requests holding a KV-cache slot"),
    "mmaas_num_requests_waiting": ("gauge", "Generation requests waiting for a KV-cache slot"),
    "mmaas_kv_cache_usage_ratio": ("gauge", "Share of the KV-cache slots held (0-1)"),
    "mmaas_kv_cache_slots": ("gauge", "KV-cache slots (sequences generated at once at most)"),
}  # fmt: skip


def exposition(metrics: Sequence[GenerationMetrics]) -> list[str]:
    """The lines of every family (HELP and TYPE once, then each model's samples); none when
    no model generates."""
    if not metrics:
        return []
    data = [(m.labels, m.families()) for m in metrics]
    lines: list[str] = []
    for name, (kind, doc) in FAMILIES.items():
        lines += [f"# HELP {name} {doc}", f"# TYPE {name} {kind}"]
        for labels, families in data:
            for suffix, extra, value in families[name]:
                text = ",".join(f'{k}="{escape_label(v)}"' for k, v in {**labels, **extra}.items())
                lines.append(f"{name}{suffix}{{{text}}} {format_value(value)}")
    return lines


def generation_lines(models: Iterable[Any]) -> list[str]:
    """:func:`exposition` of the served models whose executor has ``generation_metrics``."""
    found = [getattr(getattr(m, "executor", None), "generation_metrics", None) for m in models]
    return exposition([m for m in found if isinstance(m, GenerationMetrics)])
