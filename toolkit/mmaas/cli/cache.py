"""``mmaas cache ls|export|import|prune``: the host's TensorRT timing caches.

The store (``mmaas.backends.tensorrt.timing_cache``) lives in ``--cache-dir``, else
``$MMAAS_TIMING_CACHE_DIR``, else ``~/.cache/mmaas/timing-caches``. An export is a
``.tar.gz`` of ``<key>.cache`` + ``<key>.json`` pairs, which CI persists between runs and
imports before a build.
"""

from __future__ import annotations

import json
import tarfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import click

from mmaas.backends.tensorrt.timing_cache import CacheEntry, TimingCacheStore, import_entry
from mmaas.core.errors import UsageError


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
    """Add the caches in ARCHIVE; a pair whose bytes do not match its record is skipped."""
    store: TimingCacheStore = obj["store"]
    store.root.mkdir(parents=True, exist_ok=True)
    imported, skipped = 0, []
    for stem, (record, data) in _pairs(archive).items():
        try:
            import_entry(store, json.loads(record), data)
            imported += 1
        except (ValueError, KeyError, TypeError) as exc:
            skipped.append(f"{stem}: {exc}")
    for line in skipped:
        click.echo(f"skipped {line}", err=True)
    click.echo(f"imported {imported} timing cache(s) into {store.root}", err=True)


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


def _pairs(archive: Path) -> dict[str, tuple[bytes, bytes]]:
    """``stem -> (record bytes, cache bytes)`` of the regular files in ``archive``; member
    paths are never used as file paths (no traversal)."""
    members: dict[str, dict[str, bytes]] = {}
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar.getmembers():
                name = Path(member.name).name
                stem, suffix = Path(name).stem, Path(name).suffix
                reader = tar.extractfile(member) if member.isfile() else None
                if reader is not None and suffix in (".json", ".cache"):
                    members.setdefault(stem, {})[suffix] = reader.read()
    except (tarfile.TarError, OSError) as exc:
        raise UsageError(f"{archive}: not a timing-cache export ({exc})") from exc
    return {
        stem: (parts[".json"], parts[".cache"])
        for stem, parts in members.items()
        if ".json" in parts and ".cache" in parts
    }
