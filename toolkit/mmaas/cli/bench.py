"""``mmaas bench TARGET``: sweep concurrency against a KServe v2 gRPC server and print
throughput and latency percentiles (see :mod:`mmaas.bench.load`)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click

from mmaas.cli.options import json_option
from mmaas.core.errors import UsageError


@click.command("bench")
@click.argument("target")
@click.option("--model", "-m", required=True, help="Model name as the server serves it.")
@click.option("--model-version", default="", help="Model version (default: the server's).")
@click.option(
    "--shape",
    "shapes",
    multiple=True,
    metavar="INPUT:DIMS",
    help="Full shape of an input with dynamic dims, e.g. x:1x3x640x640 (repeat).",
)
@click.option(
    "--input-data",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Request data in perf_analyzer's --input-data JSON format (default: the model's "
    "sample_values, else random data).",
)
@click.option(
    "--concurrency",
    "-c",
    default="1,8,32",
    show_default=True,
    help="Comma list of concurrent clients to sweep.",
)
@click.option(
    "--duration",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Seconds per concurrency level.",
)
@click.option(
    "--max-requests",
    type=click.IntRange(min=1),
    help="Stop a level after this many requests, even before --duration.",
)
@click.option(
    "--warmup",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="Unmeasured requests before the first level.",
)
@json_option
def command(
    target: str,
    model: str,
    model_version: str,
    shapes: tuple[str, ...],
    input_data: Path | None,
    concurrency: str,
    duration: float,
    max_requests: int | None,
    warmup: int,
    as_json: bool,
) -> None:
    """Load-test TARGET (host:port of a KServe v2 gRPC server: mmaas, Triton, MLServer).

    Sends the requests of --input-data (perf_analyzer's format), else the model's sample
    values (an mmaas server publishes them) or random data, from closed-loop clients and
    prints, per concurrency level, requests, errors, throughput (req/s) and the mean,
    p50, p90 and p99 latency in ms, as perf_analyzer does.
    """
    from mmaas.bench.load import BenchRequest, format_table, parse_shape, run

    try:
        levels = tuple(int(part) for part in concurrency.split(","))
    except ValueError:
        levels = ()
    if not levels or min(levels) <= 0:
        raise UsageError(f"--concurrency {concurrency!r}: write positive integers, e.g. 1,8,32")
    request = BenchRequest(
        url=target,
        model=model,
        model_version=model_version,
        shapes=dict(parse_shape(text) for text in shapes),
        concurrency=levels,
        duration_s=duration,
        max_requests=max_requests,
        warmup_requests=warmup,
        input_data=input_data,
    )
    results = run(request)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "target": target,
                    "model": model,
                    "shapes": {k: list(v) for k, v in request.shapes.items()},
                    "levels": [asdict(r) for r in results],
                },
                indent=2,
            )
        )
    else:
        click.echo(format_table(results))
