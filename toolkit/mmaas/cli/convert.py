"""``mmaas convert qwen2-vl OUT_DIR [--config 2b | --checkpoint DIR] [--device gpu --precision
bf16]``: make a model directory of a pipeline
kind from a checkpoint, with the kind's convert part (:data:`mmaas.core.pipelines.PIPELINES`;
one subcommand per kind that has one). Needs the ``convert`` extra (torch, transformers),
imported only when a conversion runs."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

import click

from mmaas.pipelines.qwen2_vl.export.spec_file import PRESETS, Profile  # dataclasses only


def _say(line: str) -> None:
    click.echo(line, err=True)


@click.group("convert")
def command() -> None:
    """Convert a checkpoint into a model directory (needs `pip install "mmaas[convert]"`)."""


def profile_options(function: click.decorators.FC) -> click.decorators.FC:
    """One ``--<field>`` option per field of the served profile (:class:`Profile`); unset:
    the configuration's preset (``PRESETS``)."""
    for item in reversed(fields(Profile)):
        presets = ", ".join(f"{name} {getattr(p, item.name)}" for name, p in PRESETS.items())
        function = click.option(
            "--" + item.name.replace("_", "-"),
            type=click.IntRange(min=1),
            help=f"Served profile: {item.metadata['help']} (default: {presets}).",
        )(function)
    return function


@command.command("qwen2-vl")
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--checkpoint",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A real Qwen2-VL checkpoint folder (default: write the small random seeded one).",
)
@click.option(
    "--config",
    type=click.Choice(sorted(PRESETS)),
    default="small",
    show_default=True,
    help="The seeded checkpoint's published configuration (2b: Qwen2-VL-2B's, 9 GB to write).",
)
@click.option(
    "--device",
    type=click.Choice(["cpu", "gpu"]),
    default="cpu",
    show_default=True,
    help="Where the engines run (model.yaml's build.onnxruntime.device).",
)
@click.option(
    "--precision",
    type=click.Choice(["fp32", "fp16", "bf16"]),
    help="The language engine's precision (default: fp32 on cpu, bf16 on gpu).",
)
@click.option("--seed", type=int, help="The seeded checkpoint's weights' seed (default 5).")
@click.option("--init-std", type=float, help="Its weights' std (small 0.08, 2b 0.02).")
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
    config: str,
    device: str,
    precision: str | None,
    seed: int | None,
    init_std: float | None,
    skip_validation: bool,
    full_validation: bool,
    if_stale: bool,
    broken_trace: Path | None,
    **profile: int | None,
) -> None:
    """Write OUT_DIR: the checkpoint, the vision and language engines' ONNX graphs (each
    checked against transformers), embed_tokens.npy, tokenizer.json, runtime.json and
    model.yaml; then `mmaas build OUT_DIR`."""
    from mmaas.core.pipelines import load_part
    from mmaas.pipelines.qwen2_vl.convert.converter import ConvertOptions

    if skip_validation and full_validation:
        raise click.UsageError("--skip-validation and --full-validation exclude each other")
    precision = precision or ("bf16" if device == "gpu" else "fp32")
    if (device == "cpu") != (precision == "fp32"):
        raise click.UsageError(f"--precision {precision} on --device {device}: the CPU engine "
                               "is fp32, a GPU one fp16 or bf16")  # fmt: skip
    given = {name: value for name, value in profile.items() if value is not None}
    options = ConvertOptions(
        out_dir=out_dir,
        checkpoint=checkpoint,
        config=config,
        device=device,
        precision=precision,
        seed=seed,
        init_std=init_std,
        profile=replace(PRESETS[config], **given),
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
