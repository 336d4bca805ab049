"""The generation metrics beside Triton's: time to first token and inter-token latency
histograms, running and waiting requests, KV-cache use, in the Prometheus text format
(``promtool check metrics`` finds nothing; prometheus_client parses every sample), each
family once for every generating model, none for a model that does not generate."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from mmaas.server.llm_metrics import GenerationMetrics, generation_lines

PROMTOOL = Path(sys.executable).parent / "promtool"


class Served:
    def __init__(self, executor: object) -> None:
        self.executor = executor


class Executor:
    def __init__(self, metrics: GenerationMetrics) -> None:
        self.generation_metrics = metrics


def test_the_families_are_promtool_clean_and_parse() -> None:
    first, second = GenerationMetrics({"model": "a", "version": "1"}), GenerationMetrics(
        {"model": "b", "version": "2"})  # fmt: skip
    for seconds in (0.004, 0.03, 0.2):
        first.first_token(seconds)
    for seconds in (0.0021, 0.0024, 0.02):
        first.inter_token(seconds)
    first.set_sequences(running=3, waiting=2, used=3, slots=4)
    text = "\n".join(generation_lines([Served(Executor(first)), Served(Executor(second)),
                                       Served(object())])) + "\n"  # fmt: skip
    done = subprocess.run([str(PROMTOOL), "check", "metrics"], input=text, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done.stdout
    families = {f.name: f for f in text_string_to_metric_families(text)}
    ttft = families["mmaas_time_to_first_token_seconds"]
    samples = {(s.name, s.labels.get("model"), s.labels.get("le")): s.value for s in ttft.samples}
    assert samples[("mmaas_time_to_first_token_seconds_bucket", "a", "0.005")] == 1
    assert samples[("mmaas_time_to_first_token_seconds_bucket", "a", "0.25")] == 3
    assert samples[("mmaas_time_to_first_token_seconds_count", "a", None)] == 3
    assert samples[("mmaas_time_to_first_token_seconds_count", "b", None)] == 0
    itl = families["mmaas_inter_token_latency_seconds"]
    assert {s.value for s in itl.samples if s.labels.get("le") == "0.0025"} == {2, 0}
    usage = {s.labels["model"]: s.value for s in families["mmaas_kv_cache_usage_ratio"].samples}
    assert usage == {"a": 0.75, "b": 0.0}
    assert families["mmaas_num_requests_waiting"].samples[0].value == 2
    assert text.count("# TYPE mmaas_num_requests_running gauge") == 1


def test_no_generating_model_writes_nothing() -> None:
    assert generation_lines([Served(object())]) == []
