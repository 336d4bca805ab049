"""``mmaas doctor [--json]``: what this host can build (see :mod:`mmaas.build.doctor`).

Exit code 0 when at least one back end can build images here, else 1 (after the report):
a script can gate on ``mmaas doctor`` alone.
"""

from __future__ import annotations

import json

import click

NOTHING_USABLE_EXIT = 1


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def command(ctx: click.Context, as_json: bool) -> None:
    """Check Docker, BuildKit and what each back end needs (ONNX Runtime; GPUs and driver,
    the NVIDIA container runtime, TensorRT), and say which back ends can build images here.
    Exits 1 when none can."""
    from mmaas.build.doctor import diagnose, render_text

    report = diagnose()
    click.echo(
        json.dumps(report.to_dict(), indent=2) if as_json else render_text(report), nl=as_json
    )
    if not report.usable:
        click.secho(
            "error: no back end can build images on this host (see the report above)",
            fg="red",
            err=True,
        )
        ctx.exit(NOTHING_USABLE_EXIT)
