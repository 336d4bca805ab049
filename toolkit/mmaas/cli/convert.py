"""``mmaas convert qwen2-vl OUT_DIR [--checkpoint DIR]``: make a model directory of a pipeline
kind from a checkpoint, with the kind's convert part (:data:`mmaas.core.pipelines.PIPELINES`;
one subcommand per kind that has one). Needs the ``convert`` extra (torch, transformers),
imported only when a conversion runs."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import click

from mmaas.pipelines.qwen2_vl.export.spec_file import Profile  # dataclasses only


def _say(line: str) -> None:
    click.echo(line, err=True)


@click.group("convert")
def command() -> None:
    """Convert a checkpoint into a model directory (needs `pip install "mmaas[convert]"`)."""


def profile_options(function: click.decorators.FC) -> click.decorators.FC:
    """One ``--<field>`` option per field of the served profile (:class:`Profile`)."""
    for item in reversed(fields(Profile)):
        function = click.option(
            "--" + item.name.replace("_", "-"),
            type=click.IntRange(min=1),
            default=item.default,
            show_default=True,
            help=f"Served profile: {item.metadata['help']}.",
        )(function)
    return function


@command.command("qwen2-vl")
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--checkpoint",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A real Qwen2-VL checkpoint folder (default: write the small random seeded one).",
)
@click.option("--seed", type=int, help="The small checkpoint's weights' seed (default 5).")
@click.option("--init-std", type=float, help="The small checkpoint's weights' std (0.08).")
@profile_options
@click.option("--skip-validation", is_flag=True, help="Do not compare with transformers.")
@click.option(
    "--full-validation", is_flag=True, help="Also validate at the profile's largest points."
)
@click.option(
    "--if-stale", is_flag=True, help="Do nothing when OUT_DIR holds a current conversion."
)
@click.option(
    "--broken-trace",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="PATH",
    help="Only write the known-bad plain trace of the vision encoder to PATH.",
)
def qwen2_vl(
    out_dir: Path,
    checkpoint: Path | None,
    seed: int | None,
    init_std: float | None,
    skip_validation: bool,
    full_validation: bool,
    if_stale: bool,
    broken_trace: Path | None,
    **profile: int,
) -> None:
    """Write OUT_DIR: the checkpoint, the vision and language engines' ONNX graphs (each
    checked against transformers), embed_tokens.npy, tokenizer.json, runtime.json and
    model.yaml; then `mmaas build OUT_DIR`."""
    from mmaas.core.pipelines import load_part
    from mmaas.pipelines.qwen2_vl.convert.converter import ConvertOptions

    if skip_validation and full_validation:
        raise click.UsageError("--skip-validation and --full-validation exclude each other")
    options = ConvertOptions(
        out_dir=out_dir,
        checkpoint=checkpoint,
        seed=seed,
        init_std=init_std,
        profile=Profile(**profile),
        validation="skip" if skip_validation else "full" if full_validation else "default",
        if_stale=if_stale,
        broken_trace=broken_trace,
    )
    result = load_part("qwen2-vl", "convert").convert(options, _say)
    if result.up_to_date:
        click.echo(f"qwen-vl export up to date: {out_dir}")
    elif broken_trace:
        click.echo(f"wrote the known-bad vision trace {broken_trace}")
    else:
        click.echo(f"qwen-vl export written: {out_dir} in {result.seconds:.0f} s")
