"""``mmaas cache ls|export|import|prune``: the host's TensorRT timing caches.

The store (``mmaas.backends.tensorrt.builder.timing_cache``) lives in ``--cache-dir``, else
``$MMAAS_TIMING_CACHE_DIR``, else ``~/.cache/mmaas/timing-caches``. An export is a
``.tar.gz`` of ``<key>.cache`` + ``<key>.json`` pairs, which CI persists between runs and
imports before a build.
"""

from __future__ import annotations

import json
import tarfile
import zlib
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import click

from mmaas.core.errors import IntegrityError, UsageError

if TYPE_CHECKING:
    from mmaas.backends.tensorrt.builder.timing_cache import (
        CacheEntry,
        CacheKey,
        TimingCacheStore,
    )


@click.group("cache")
@click.option(
    "--cache-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Timing-cache directory (default: $MMAAS_TIMING_CACHE_DIR or "
    "~/.cache/mmaas/timing-caches).",
)
@click.pass_context
def command(ctx: click.Context, cache_dir: Path | None) -> None:
    """Manage TensorRT timing caches, keyed by TensorRT version, compute capability, GPU."""
    from mmaas.backends.tensorrt.builder.timing_cache import TimingCacheStore

    ctx.ensure_object(dict)["store"] = TimingCacheStore(cache_dir)


@command.command("ls")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
@click.pass_obj
def list_caches(obj: dict, as_json: bool) -> None:
    """List stored caches (key, size in bytes, last update)."""
    entries = obj["store"].entries()
    if as_json:
        click.echo(json.dumps([_row(e) for e in entries], indent=2))
        return
    if not entries:
        click.echo(f"no timing caches in {obj['store'].root}", err=True)
    for entry in entries:
        click.echo(f"{entry.path.stem}\t{entry.size_bytes}\t{entry.updated}")


@command.command("export")
@click.argument("archive", type=click.Path(dir_okay=False, path_type=Path))
@click.pass_obj
def export_caches(obj: dict, archive: Path) -> None:
    """Write every stored cache into ARCHIVE (.tar.gz)."""
    entries = obj["store"].entries()
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz") as tar:
        for entry in entries:
            tar.add(entry.path, arcname=entry.path.name)
            tar.add(entry.path.with_suffix(".json"), arcname=entry.path.stem + ".json")
    click.echo(f"exported {len(entries)} timing cache(s) to {archive}", err=True)


@command.command("import")
@click.argument("archive", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.pass_obj
def import_caches(obj: dict, archive: Path) -> None:
    """Add the caches in ARCHIVE (an export), replacing local ones of the same key.

    All or nothing: every pair is checked first (its record, size and sha256); an archive
    with a bad entry imports nothing and exits 1, naming each bad entry.
    """
    from mmaas.backends.tensorrt.builder.timing_cache import checked_import

    store: TimingCacheStore = obj["store"]
    checked: list[tuple[CacheKey, bytes]] = []
    bad: list[str] = []
    for stem, parts in _members(archive, bad).items():
        if set(parts) != {".json", ".cache"}:
            missing = ({".json", ".cache"} - set(parts)).pop()
            bad.append(f"{stem}{next(iter(parts))}: its {stem}{missing} is not in the archive")
            continue
        try:
            key = checked_import(parts[".json"], parts[".cache"])
        except ValueError as exc:
            bad.append(f"{stem}.cache: {exc}")
            continue
        if key.slug != stem:
            bad.append(f"{stem}.json: its record is for {key.slug}")
            continue
        checked.append((key, parts[".cache"]))
    if bad:
        raise IntegrityError(
            f"{archive}: {len(bad)} bad entr{'y' if len(bad) == 1 else 'ies'}, nothing "
            "imported:\n" + "\n".join(f"  {line}" for line in bad),
            hint="export the caches again (mmaas cache export), or import another archive",
        )
    for key, data in checked:
        store.put(key, data)
    click.echo(f"imported {len(checked)} timing cache(s) into {store.root}", err=True)


@command.command("prune")
@click.option(
    "--older-than",
    "days",
    type=click.IntRange(min=0),
    default=None,
    help="Remove caches not updated for this many days.",
)
@click.option("--all", "everything", is_flag=True, help="Remove every cache.")
@click.pass_obj
def prune_caches(obj: dict, days: int | None, everything: bool) -> None:
    """Remove caches: all of them, or those older than --older-than days."""
    if days is None and not everything:
        raise UsageError("say what to prune: --older-than DAYS or --all")
    store: TimingCacheStore = obj["store"]
    cutoff = datetime.now(timezone.utc) - timedelta(days=days or 0)
    removed = [
        e for e in store.entries() if everything or datetime.fromisoformat(e.updated) < cutoff
    ]
    for entry in removed:
        store.discard(entry.key)
    click.echo(f"removed {len(removed)} timing cache(s)", err=True)


def _row(entry: CacheEntry) -> dict:
    return {
        "name": entry.path.stem,
        "tensorrt_version": entry.key.tensorrt_version,
        "compute_capability": entry.key.compute_capability,
        "gpu_name": entry.key.gpu_name,
        "size_bytes": entry.size_bytes,
        "sha256": entry.sha256,
        "updated": entry.updated,
    }


def _members(archive: Path, bad: list[str]) -> dict[str, dict[str, bytes]]:
    """``stem -> {".json": bytes, ".cache": bytes}`` of the archive's files; a member that
    is not a regular ``.json``/``.cache`` file is added to ``bad``. Member paths are never
    used as file paths (no traversal).

    Raises:
        UsageError: the file is not a gzip'd tar archive.
    """
    members: dict[str, dict[str, bytes]] = {}
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar.getmembers():
                name = Path(member.name).name
                stem, suffix = Path(name).stem, Path(name).suffix
                reader = tar.extractfile(member) if member.isfile() else None
                if reader is None or suffix not in (".json", ".cache"):
                    bad.append(f"{member.name}: not a timing-cache file of an export")
                    continue
                members.setdefault(stem, {})[suffix] = reader.read()
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise UsageError(f"{archive}: not a timing-cache export ({exc})") from exc
    return members
