"""``mmaas init PATH --onnx MODEL.onnx``: write a model.yaml from an ONNX model's graph."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("init")
@click.argument("path", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--onnx",
    "onnx_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The ONNX model; model.yaml refers to it by a path relative to PATH.",
)
@click.option("--name", help="Model name (default: PATH's folder name).")
@click.option(
    "--max-batch-size",
    type=click.IntRange(min=0),
    default=None,
    help="Batch axis size limit; 0 = no batch axis (default: 4 when axis 0 of "
    "every input and output is dynamic, else 0).",
)
@click.option("--force", is_flag=True, help="Overwrite an existing model.yaml.")
def command(
    path: Path, onnx_path: Path, name: str | None, max_batch_size: int | None, force: bool
) -> None:
    """Write PATH/model.yaml for an ONNX model.

    The spec carries the graph's real input and output names, datatypes and shapes, a
    sha256 pin of the ONNX file, and an optimization profile (min/opt/max) for every input
    with a dynamic axis. Profile sizes other than the batch are guesses: adjust them, then
    run `mmaas validate PATH`.
    """
    from mmaas.build.spec_checks import host_checks
    from mmaas.spec.scaffold import init_model_folder

    loaded = init_model_folder(
        path,
        onnx_path,
        checks=host_checks(),
        name=name,
        max_batch_size=max_batch_size,
        force=force,
    )
    click.echo(
        f"wrote {loaded.path} ({len(loaded.spec.inputs)} inputs, "
        f"{len(loaded.spec.outputs)} outputs, max_batch_size "
        f"{loaded.spec.max_batch_size}); review the profile sizes, then run "
        f"`mmaas validate {path}`"
    )
