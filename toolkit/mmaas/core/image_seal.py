"""Sealing an image and checking its seal: the model manifest records the image's file
listing (:mod:`mmaas.core.file_listing`), so the signed manifest digest covers every file
the image runs or serves, its SBOM and its provenance (a manifest field) by hash.

* Build: the runtime stage ends with ``python -I -B -m mmaas.core.image_seal MODEL_DIR
  ROOT...`` (:func:`seal`), after the SBOM is in place; ``mmaas build --sign`` then signs
  the sealed manifest's digest.
* Start: the server re-checks every listed path against the file system
  (:func:`check_image`); with ``MMAAS_TRUSTED_KEYS`` an image without a listing is refused,
  and so is an interpreter that could run code from elsewhere (:func:`check_interpreter`).
* Host: ``mmaas verify`` checks the same listing against the bytes streamed out of the
  image, and the image's launch settings (:func:`check_launch`): the entrypoint must be
  :data:`ENTRYPOINT` (``-I``: isolated, so neither the working directory nor ``PYTHON*``
  variables put code on ``sys.path``) and no variable may preload a library.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from mmaas.core.errors import IntegrityError
from mmaas.core.file_listing import LISTING_NAME, Listing, check, make_listing, observe_fs, under
from mmaas.core.files import atomic_write_text
from mmaas.core.manifest import FileRecord, verify_file
from mmaas.core.model_manifest import (
    SCHEMA_VERSION,
    ModelManifest,
    read_model_manifest,
    verify_model,
    write_model_manifest,
)

# How the image starts the server: isolated (-I: no working directory, user site or PYTHON*
# variables on the path), no bytecode written (-B), unbuffered output (-u).
ENTRYPOINT = ("python", "-I", "-B", "-u", "-m", "mmaas.server")
PRELOADS = ("LD_PRELOAD", "LD_AUDIT")  # variables that load a library into every process


def seal(
    model_dir: Path, roots: Sequence[str], path: Sequence[str] | None = None
) -> tuple[ModelManifest, Listing]:
    """Verify the model directory, list the image (:func:`make_listing`: ``roots`` and
    ``path``, default this interpreter's ``sys.path``), write the listing into it and the
    manifest over it, sealed anew; return both.

    Raises:
        IntegrityError: the model directory fails verification, or a root holds a special
            file.
    """
    manifest = read_model_manifest(model_dir)
    verify_model(model_dir, manifest)
    recorded = recorded_files(model_dir, manifest)
    listing = make_listing(model_dir, roots, recorded, sys.path if path is None else path)
    atomic_write_text(model_dir / LISTING_NAME, listing.to_json())
    record = FileRecord.of(model_dir, LISTING_NAME)
    sealed = replace(manifest, image_files=record, schema_version=SCHEMA_VERSION)
    return write_model_manifest(model_dir, sealed), listing


def recorded_files(model_dir: Path, manifest: ModelManifest) -> list[str]:
    """The absolute paths of the files ``manifest`` records by hash: every engine file,
    engine data file and asset."""
    base = Path(os.path.abspath(model_dir))
    paths = [
        base / entry.directory / record.path
        for entry in manifest.engines
        for record in (entry.manifest.engine, *entry.manifest.engine_data)
    ]
    paths += [base / asset.file.path for asset in manifest.assets]
    return [os.path.normpath(path) for path in paths]


def read_listing(model_dir: Path, manifest: ModelManifest) -> Listing | None:
    """The image's file listing, checked against its record in ``manifest`` (None when
    the manifest has none: a model directory outside an image).

    Raises:
        IntegrityError: the listing differs from its record, or is unreadable.
    """
    if manifest.image_files is None:
        return None
    verify_file(model_dir, manifest.image_files, "image file listing")
    path = model_dir / manifest.image_files.path
    return Listing.from_json(path.read_text(), str(path))


def check_image(model_dir: Path, manifest: ModelManifest, trusted: bool) -> str | None:
    """At start: check every path of the image's file listing against this file system;
    with ``trusted`` keys also the interpreter (:func:`check_interpreter`). Returns the
    line to log (None: no listing to check, a model directory outside an image).

    Raises:
        IntegrityError: a path differs (naming it), or with ``trusted``: no listing, a
            model directory other than the listed one, or an interpreter that could run
            unlisted code.
    """
    started = time.perf_counter()
    listing = read_listing(model_dir, manifest)
    if listing is None:
        if trusted:
            raise IntegrityError(
                f"{model_dir}: the manifest has no image file listing, so its signature "
                "covers the engines but not the code that runs them; refusing it "
                "(trusted keys are set)",
                hint="rebuild the image with this mmaas (`mmaas build --sign KEY`)",
            )
        return None
    check(listing, observe_fs(listing), str(model_dir))
    if trusted:
        if os.path.abspath(model_dir) != listing.model_dir:
            raise IntegrityError(
                f"MMAAS_MODEL_DIR is {model_dir}, but the signed listing covers the model "
                f"directory {listing.model_dir}; serve that one (trusted keys are set)"
            )
        check_interpreter(listing, sys.path, os.environ)
    seconds = time.perf_counter() - started
    return (
        f"image files verified: {len(listing.files)} files, {len(listing.links)} links "
        f"under {', '.join(listing.roots)} ({seconds * 1000:.0f} ms)"
    )


def check_interpreter(listing: Listing, path: Sequence[str], environ: Mapping[str, str]) -> None:
    """Only listed code may run: every ``sys.path`` entry (``path``) is inside the
    listing's roots or listed absent and still absent, no variable preloads a library,
    and ``LD_LIBRARY_PATH`` names only directories inside the roots.

    Raises:
        IntegrityError: naming the entry or variable and the fix.
    """
    for entry in path:
        where = os.path.abspath(entry or os.getcwd())
        if not under(where, listing.roots) and where not in listing.absent:
            raise IntegrityError(
                f"sys.path holds {entry or '(the working directory)'!r} ({where}), which the "
                "signed listing does not cover: code from there would run unchecked; start "
                f"the server as the image does: {' '.join(ENTRYPOINT)}"
            )
    check_environment(listing, environ)


def check_environment(listing: Listing, environ: Mapping[str, str]) -> None:
    """Refuse a library preload (``LD_PRELOAD``, ``LD_AUDIT``) and an ``LD_LIBRARY_PATH``
    entry outside the listing's roots, in ``environ``.

    Raises:
        IntegrityError: naming the variable and its value.
    """
    for name in PRELOADS:
        if environ.get(name):
            raise IntegrityError(
                f"{name}={environ[name]!r} loads a library the signed listing does not cover "
                "into the server; unset it (trusted keys are set)"
            )
    for entry in filter(None, environ.get("LD_LIBRARY_PATH", "").split(":")):
        if not under(os.path.abspath(entry), listing.roots):
            raise IntegrityError(
                f"LD_LIBRARY_PATH names {entry!r}, outside the signed listing's roots "
                f"({', '.join(listing.roots)}); libraries from there would load unchecked"
            )


def check_launch(image: str, config: Mapping[str, Any], listing: Listing) -> None:
    """Check how ``image`` starts (its Docker config: ``Entrypoint``, ``Cmd``, ``Env``): the
    server as :data:`ENTRYPOINT` starts it, and no variable that loads unlisted code.

    Raises:
        IntegrityError: another entrypoint or command, or such a variable.
    """
    entrypoint, command = list(config.get("Entrypoint") or []), config.get("Cmd") or []
    if entrypoint != list(ENTRYPOINT) or command:
        raise IntegrityError(
            f"{image}: starts {entrypoint!r} with command {command!r}, not the server as "
            f"mmaas builds it ({list(ENTRYPOINT)!r}); an image made FROM it changed how it "
            "starts, refusing it"
        )
    environ = {}
    for item in config.get("Env") or []:
        name, _, value = str(item).partition("=")
        environ[name] = value
    try:
        check_environment(listing, environ)
    except IntegrityError as exc:
        raise IntegrityError(f"{image}: its environment: {exc.message}") from None


def main(argv: list[str]) -> int:
    """``python -I -B -m mmaas.core.image_seal MODEL_DIR [ROOT...]``: seal the image (the
    runtime stage's last step); 0 and one line, 1 and one line naming the problem, 2 for a
    usage error."""
    if not argv:
        print("usage: python -I -B -m mmaas.core.image_seal MODEL_DIR [ROOT...]", file=sys.stderr)
        return 2
    try:
        manifest, listing = seal(Path(argv[0]), argv[1:])
    except IntegrityError as exc:
        print(f"mmaas: error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(
        f"sealed {manifest.name} {manifest.version}: {len(listing.files)} files, "
        f"{len(listing.links)} links under {', '.join(listing.roots)}; manifest "
        f"{manifest.manifest_digest}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
