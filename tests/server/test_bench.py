"""``mmaas bench`` (mmaas.bench.load, mmaas.cli.bench) against the real server; here because
it needs the server fixtures."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from mmaas.bench.load import BenchRequest, format_table, parse_shape, run
from mmaas.cli.bench import command
from mmaas.core.errors import UsageError

from .conftest import RunningServer


@pytest.fixture(scope="module")
def server(module_server: Callable[..., RunningServer], two_outputs_dir: Path) -> RunningServer:
    return module_server(two_outputs_dir)


def test_levels_count_requests_and_order_percentiles(server: RunningServer) -> None:
    results = run(
        BenchRequest(
            url=server.url,
            model="two-outputs",
            shapes={"x": (2, 4)},
            concurrency=(1, 4),
            duration_s=30,
            max_requests=20,
        )
    )
    assert [r.concurrency for r in results] == [1, 4]
    for result in results:
        assert result.requests == 20 and result.errors == 0
        assert 0 < result.p50_ms <= result.p90_ms <= result.p99_ms
        assert result.throughput_rps > 0
    assert "concurrency" in format_table(results).splitlines()[0]


def test_errors_are_counted_with_the_server_message(server: RunningServer) -> None:
    (result,) = run(
        BenchRequest(
            url=server.url,
            model="two-outputs",
            shapes={"x": (9, 4)},
            warmup_requests=0,
            max_requests=5,
        )
    )
    assert result.requests == 0 and result.errors == 5
    assert "INVALID_ARGUMENT" in result.error_samples[0]
    assert "axis 0 is 9, allowed 1..8" in result.error_samples[0]


def test_dynamic_inputs_need_a_shape(server: RunningServer) -> None:
    with pytest.raises(UsageError, match=r"'x' has dynamic dims \[-1, 4\].*--shape x:1x4"):
        run(BenchRequest(url=server.url, model="two-outputs"))


def test_cli_prints_json(server: RunningServer) -> None:
    outcome = CliRunner().invoke(
        command,
        [
            server.url,
            "-m",
            "two-outputs",
            "--shape",
            "x:1x4",
            "-c",
            "2",
            "--max-requests",
            "6",
            "--json",
        ],
    )
    assert outcome.exit_code == 0, outcome.output
    report = json.loads(outcome.output)
    assert report["shapes"] == {"x": [1, 4]}
    assert report["levels"][0]["requests"] == 6


def test_parse_shape() -> None:
    assert parse_shape("input:0:1x3x224x224") == ("input:0", (1, 3, 224, 224))
    for bad in ("x", "x:1x0", "x:ax3", ":1x3"):
        with pytest.raises(UsageError, match="write INPUT:DIMS"):
            parse_shape(bad)
