"""``mmaas export kserve|triton MODEL -o DIR``: take a built image to production."""

from __future__ import annotations

from pathlib import Path

import click

IMAGE_HELP = (
    "The pushed image to deploy, pinned by digest (REGISTRY/NAME@sha256:<hex>, as `mmaas "
    "push` prints it; pull it first, e.g. `mmaas verify REF --pull`). Default: the image "
    "`mmaas build MODEL` tagged, by its pushed digest when it has one."
)


def _say(line: str) -> None:
    click.echo(f"mmaas: {line}", err=True)


@click.group("export")
def command() -> None:
    """Export a built model to KServe, plain Kubernetes or a Triton model repository."""


@command.command("kserve")
@click.argument("model", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--out",
    "out_dir",
    required=True,
    type=click.Path(path_type=Path),
    help="Folder to write the YAML files into (new, empty, or an earlier export).",
)
@click.option("--image", default=None, metavar="REF@sha256:...", help=IMAGE_HELP)
@click.option(
    "--plain",
    is_flag=True,
    help="Deployment + Service + HorizontalPodAutoscaler + PodDisruptionBudget "
    "instead of a KServe ServingRuntime + InferenceService.",
)
@click.option(
    "--mode",
    type=click.Choice(["raw", "serverless"]),
    default="raw",
    show_default=True,
    help="KServe deployment mode: raw (every port routed) or serverless (Knative: "
    "the gRPC port only, as h2c).",
)
@click.option(
    "--protocol",
    type=click.Choice(["grpc-v2", "v2"]),
    default="grpc-v2",
    show_default=True,
    help="The protocol KServe routes (the Service's port 80, or Knative's one port): "
    "KServe v2 gRPC or KServe v2 REST.",
)
@click.option(
    "--trusted-key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Ed25519 public key (PEM) the server must find the engine signed with "
    "(set as MMAAS_TRUSTED_KEYS).",
)
def kserve(
    model: Path,
    out_dir: Path,
    image: str | None,
    plain: bool,
    mode: str,
    protocol: str,
    trusted_key: Path | None,
) -> None:
    """Write MODEL's Kubernetes objects into DIR (`kubectl apply -f DIR`).

    The image is verified first (manifest, engine hashes, labels); the objects pin its
    engine (MMAAS_EXPECTED_ENGINE) and name every port the server listens on.
    """
    from mmaas.export.manifests import export_kubernetes

    done = export_kubernetes(
        model,
        out_dir,
        image=image,
        plain=plain,
        mode="serverless" if mode == "serverless" else "raw",
        protocol="v2" if protocol == "v2" else "grpc-v2",
        trusted_key=trusted_key,
        say=_say,
    )
    for name in done.files:
        click.echo(str(done.out_dir / name))


@command.command("triton")
@click.argument("model", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--out",
    "repository",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The Triton model repository; MODEL goes into REPOSITORY/<name>/ (other models "
    "are left alone).",
)
@click.option("--image", default=None, metavar="REF@sha256:...", help=IMAGE_HELP)
@click.option(
    "--version",
    "triton_version",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="Triton's model version folder (an integer).",
)
@click.option(
    "--device",
    type=click.Choice(["cpu", "gpu"]),
    default=None,
    help="Where Triton runs the model (its instance_group kind): cpu ships the image's "
    "engine (ONNX Runtime's graph optimized for the CPU), gpu the source ONNX it was built "
    "from (provider-neutral: Triton optimizes it for its GPU); TensorRT engines: gpu only. "
    "Default: where the model's back end serves.",
)
def triton(
    model: Path, repository: Path, image: str | None, triton_version: int, device: str | None
) -> None:
    """Write MODEL's verified graph and config.pbtxt into a Triton model repository."""
    from mmaas.export.triton import export_triton

    done = export_triton(
        model,
        repository,
        image=image,
        version=triton_version,
        say=_say,
        device="gpu" if device == "gpu" else "cpu" if device == "cpu" else None,
    )
    click.echo(str(done.model_dir / "config.pbtxt"))
