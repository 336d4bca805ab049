"""``mmaas doctor [--json]``: what this host can build (see :mod:`mmaas.build.doctor`)."""

from __future__ import annotations

import json

import click

from mmaas.build.doctor import diagnose, render_text


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def command(as_json: bool) -> None:
    """Check Docker, BuildKit, GPUs and driver, the NVIDIA container runtime, TensorRT
    and ONNX Runtime, and say which back ends can build images here."""
    report = diagnose()
    click.echo(
        json.dumps(report.to_dict(), indent=2) if as_json else render_text(report), nl=as_json
    )
