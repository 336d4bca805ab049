"""``mmaas build MODEL``: build, verify and label MODEL's serving image."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click

from mmaas.build.cache.reuse import CacheOptions
from mmaas.build.pipeline import build_image
from mmaas.build.registry import credentials_from_env, parse_registry, push_image
from mmaas.cli.options import ca_bundle_option, json_option


@click.command("build")
@click.argument("model", type=click.Path(path_type=Path))
@ca_bundle_option
@click.option("--revision", help="Source revision for the org.opencontainers.image.revision label.")
@click.option(
    "--engine-cache/--no-engine-cache",
    default=True,
    show_default=True,
    help="Reuse an engine built from the same inputs instead of compiling, and "
    "keep a freshly compiled one.",
)
@click.option(
    "--engine-cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Local engine cache (default: $MMAAS_CACHE_DIR/engines, else ~/.cache/mmaas/engines).",
)
@click.option(
    "--engine-cache-registry",
    metavar="HOST[:PORT]/NAMESPACE",
    envvar="MMAAS_ENGINE_CACHE_REGISTRY",
    default=None,
    help="Share engines through this registry as <name>-engine-cache:<key> images: "
    "pull a hit, push a miss (credentials: $MMAAS_REGISTRY_USER/_PASSWORD or "
    "docker login).",
)
@click.option(
    "--rebuild",
    is_flag=True,
    help="Run the Docker builds even when the local image was built and verified from the "
    "same inputs (by default such an image is reused: no Docker build runs).",
)
@click.option(
    "--push",
    "push_to",
    metavar="HOST[:PORT]/NAMESPACE",
    default=None,
    help="After the build, push the image as NAME:VERSION and NAME:blake3-<engine hash> "
    "(credentials: $MMAAS_REGISTRY_USER/_PASSWORD or docker login); prints the digest.",
)
@json_option
def command(
    model: Path,
    ca_bundle: Path | None,
    revision: str | None,
    engine_cache: bool,
    engine_cache_dir: Path | None,
    engine_cache_registry: str | None,
    rebuild: bool,
    push_to: str | None,
    as_json: bool,
) -> None:
    """Build MODEL (a folder holding model.yaml, or the model.yaml itself) into an image.

    Progress streams to stderr; the image tag and id are printed on stdout.
    """
    registry = parse_registry(engine_cache_registry) if engine_cache_registry else None
    target = parse_registry(push_to) if push_to else None  # usage errors before building
    result = build_image(
        model,
        ca_bundle=ca_bundle,
        revision=revision,
        cache=CacheOptions(engine_cache, engine_cache_dir, registry, reuse_image=not rebuild),
    )
    pushed = None
    if target is not None:
        info = result.manifest.model
        pushed = push_image(
            result.image, target, info.name, info.version, credentials=credentials_from_env()
        )
    if as_json:
        click.echo(
            json.dumps(
                {
                    "image": result.image,
                    "image_id": result.image_id,
                    "engine": asdict(result.manifest.engine),
                    "engine_key": result.engine_key,
                    "engine_cache": result.engine_cache,
                    "labels": result.labels,
                    "plan_digest": result.plan_digest,
                    "seconds": result.seconds,
                    "pushed": pushed.to_json() if pushed else None,
                },
                indent=2,
            )
        )
        return
    click.echo(f"built {result.image} ({result.image_id}) in {result.seconds:.1f} s")
    click.echo(f"engine {result.manifest.engine.path} {result.manifest.engine.blake3}")
    click.echo(f"engine cache {result.engine_cache} {result.engine_key or ''}".rstrip())
    if pushed is not None:
        click.echo(f"pushed {pushed.reference} (tags {', '.join(pushed.tags)})")
