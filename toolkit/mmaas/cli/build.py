"""``mmaas build MODEL``: build, verify and label MODEL's serving image.

Progress (one line per phase, :mod:`mmaas.cli.progress`) goes to stderr, every raw output
line to the build log (``MODEL/.mmaas/build.log`` unless ``--log``); stdout holds the
result: a summary table, the JSON with ``--json``, or the image reference alone with
``--quiet``.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import click

from mmaas.cli.options import ca_bundle_option, json_option
from mmaas.core.errors import DockerError, UsageError

if TYPE_CHECKING:
    from mmaas.cli.progress import Mode

LOG_NAME = Path(".mmaas") / "build.log"


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
@click.option(
    "--sign",
    "sign_with",
    metavar="KEY",
    default=None,
    help="Sign the manifest's digest with this Ed25519 private key (a PEM file, or "
    "env:NAME for the PEM in the environment variable NAME); the signature goes into the "
    "image as a file and labels. Password: $MMAAS_SIGNING_KEY_PASSWORD.",
)
@click.option(
    "--log",
    "log_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help=f"Write every raw output line (BuildKit, the compile) here (default: MODEL/{LOG_NAME}).",
)
@click.option("-v", "--verbose", is_flag=True, help="Print the raw output lines too.")
@click.option(
    "-q", "--quiet", is_flag=True, help="Print only errors, and the image reference on stdout."
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
    sign_with: str | None,
    log_path: Path | None,
    verbose: bool,
    quiet: bool,
    as_json: bool,
) -> None:
    """Build MODEL (a folder holding model.yaml, or the model.yaml itself) into an image.

    Progress goes to stderr (raw BuildKit lines only with --verbose, always in the log);
    stdout gets a summary table, or the JSON with --json.
    """
    from mmaas.build.cache.reuse import CacheOptions
    from mmaas.build.pipeline import build_image
    from mmaas.build.registry import parse_registry, push_image
    from mmaas.build.registry_calls import credentials_from_env
    from mmaas.build.signing import load_signing_key
    from mmaas.cli.progress import BuildConsole, make_console, summary_table

    if verbose and quiet:
        raise UsageError("--verbose and --quiet exclude each other", hint="pass one of them")
    registry = parse_registry(engine_cache_registry) if engine_cache_registry else None
    target = parse_registry(push_to) if push_to else None  # usage errors before building
    signing = load_signing_key(sign_with) if sign_with else None
    mode: Mode = "verbose" if verbose else "quiet" if quiet else "normal"
    folder = model if model.is_dir() else model.parent
    if not model.exists() or not folder.is_dir():
        raise UsageError(f"{model}: no such model folder or model.yaml")
    log = log_path or folder / LOG_NAME
    console = BuildConsole(log, mode)
    with console.running():
        result = build_image(
            model,
            ca_bundle=ca_bundle,
            revision=revision,
            cache=CacheOptions(engine_cache, engine_cache_dir, registry, reuse_image=not rebuild),
            signing=signing,
            say=console.say,
            phase=console.phase,
        )
    pushed = None
    manifest = result.manifest
    if target is not None:
        pushed = push_image(
            result.image,
            target,
            manifest.name,
            manifest.version,
            credentials=credentials_from_env(),
        )
    engines = {
        entry.name: {
            "model": entry.manifest.model.name,
            "engine": asdict(entry.manifest.engine),
            "engine_data": [asdict(data) for data in entry.manifest.engine_data],
            "engine_key": result.engines[entry.name].key,
            "engine_cache": result.engines[entry.name].cache,
        }
        for entry in manifest.engines
    }
    if as_json:
        click.echo(
            json.dumps(
                {
                    "image": result.image,
                    "image_id": result.image_id,
                    "engine": asdict(manifest.engines[0].manifest.engine)
                    if len(manifest.engines) == 1
                    else None,
                    "engine_key": result.engine_key,
                    "engine_cache": result.engine_cache,
                    "engines": engines,
                    "assets": {a.name: asdict(a.file) for a in manifest.assets},
                    "labels": result.labels,
                    "plan_digest": result.plan_digest,
                    "seconds": result.seconds,
                    "log": str(log),
                    "pushed": pushed.to_json() if pushed else None,
                    "signature": asdict(result.signature) if result.signature else None,
                },
                indent=2,
            )
        )
        return
    if quiet:
        click.echo(result.image)
        return
    make_console(stderr=False).print(summary_table(result, _size(result.image), log))
    if result.signature is not None:
        click.echo(f"signed by {result.signature.key_id}")
    if pushed is not None:
        click.echo(f"pushed {pushed.reference} (tags {', '.join(pushed.tags)})")


def _size(image: str) -> int | None:
    from mmaas.build import docker as docker_engine

    try:
        return int(docker_engine.inspect_image(image)["Size"])
    except (DockerError, KeyError, ValueError):
        return None
