"""An image's file listing: every file it runs or serves, by content, which the model
manifest records (:mod:`mmaas.core.image_seal`), so the one signed digest
(:mod:`mmaas.core.signing`) covers them all.

The runtime stage's last build step (``python -I -B -m mmaas.core.image_seal MODEL_DIR ROOT...``,
the interpreter started as the image's entrypoint starts it) writes the listing
:data:`LISTING_NAME` into the model directory and records it (its digests) in the model
manifest (``image_files``), which it seals anew. The listing holds:

* ``roots``: the directories covered whole: the ``ROOT`` arguments (``/opt/mmaas``: the
  model directory, the SBOM, the server's virtual environment, the wheels) and every
  directory on the interpreter's ``sys.path`` (its standard library and extension modules);
* ``files`` (blake3 of each regular file) and ``links`` (each symbolic link's target) under
  them, and outside them the end of every link chain that leaves them (the interpreter
  binary behind ``venv/bin/python``, Debian's ``/etc/python3.11/sitecustomize.py``);
* ``absent``: the ``sys.path`` entries that do not exist (``python311.zip``): creating one
  would put code on the path;
* ``model_dir``: its ``manifest.json``, the signature beside it and the listing itself are
  the only files not listed (the manifest covers the listing, the signature the manifest);
  the engine files and assets the manifest records by hash are listed as :data:`RECORDED`
  (there, and files: their bytes are checked against the manifest, not hashed twice).

:func:`check` compares a listing with what is there now: a changed, missing or added file,
link or path entry is refused, naming it. At start the server observes the real file
system (:func:`observe_fs`); ``mmaas verify`` observes the image's own bytes, streamed out
of it (:mod:`mmaas.build.image_files`). Neither trusts a label.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import blake3

from mmaas.core.errors import IntegrityError

LISTING_NAME = "image-files.json"
FORMAT = 1
FILE, LINK, OTHER = "file", "link", "other"
RECORDED = "manifest"  # the digest of a file whose digests the model manifest records
Entry = tuple[str, str]  # (FILE, blake3 hex) | (LINK, target) | (OTHER, "")
BIG_FILE = 8 << 20  # bytes: hashed with blake3's threads


@dataclass(frozen=True)
class Listing:
    """What a sealed image holds (see the module docstring); paths are absolute, as in
    the image."""

    model_dir: str
    roots: tuple[str, ...]
    files: Mapping[str, str] = field(default_factory=dict)
    links: Mapping[str, str] = field(default_factory=dict)
    absent: tuple[str, ...] = ()

    def recorded(self) -> set[str]:
        """The files whose digests the model manifest records (:data:`RECORDED`)."""
        return {path for path, digest in self.files.items() if digest == RECORDED}

    def unlisted(self) -> set[str]:
        """The files of the model directory that are not listed (manifest, signature,
        listing)."""
        names = ("manifest.json", "manifest.sig.json", LISTING_NAME)
        return {f"{self.model_dir}/{name}" for name in names}

    def outside(self) -> list[str]:
        """Listed paths outside every root (ends of link chains) and the absent ones."""
        paths = [*self.files, *self.links, *self.absent]
        return [path for path in paths if not under(path, self.roots)]

    def to_json(self) -> str:
        """The listing file's text (sorted, one JSON document)."""
        document = {
            "format": FORMAT,
            "model_dir": self.model_dir,
            "roots": list(self.roots),
            "absent": list(self.absent),
            "files": dict(sorted(self.files.items())),
            "links": dict(sorted(self.links.items())),
        }
        return json.dumps(document, indent=0, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, where: str) -> Listing:
        """Read :meth:`to_json`'s text. Raises IntegrityError naming ``where``."""
        try:
            raw = json.loads(text)
            if raw["format"] != FORMAT:
                raise ValueError(f"format {raw['format']!r}, this mmaas reads {FORMAT}")
            return cls(
                raw["model_dir"],
                tuple(raw["roots"]),
                dict(raw["files"]),
                dict(raw["links"]),
                tuple(raw["absent"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise IntegrityError(f"{where}: unreadable image file listing ({exc})") from exc


def under(path: str, roots: Iterable[str]) -> bool:
    """True when ``path`` is one of ``roots`` or inside one."""
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def make_listing(
    model_dir: Path, roots: Sequence[str], recorded: Collection[str], path: Sequence[str]
) -> Listing:
    """List this file system: the model directory, ``roots`` and the interpreter's
    ``path`` (its ``sys.path``; see the module docstring); ``recorded``: the files the
    model manifest records by hash (absolute paths), listed as :data:`RECORDED`.

    Raises:
        IntegrityError: a special file (a FIFO, a device) lies under a root.
    """
    covered: list[str] = []
    absent: list[str] = []
    for entry in (str(model_dir), *roots, *path):
        where = os.path.abspath(entry or os.getcwd())
        if not os.path.lexists(where):
            absent.append(where)
        elif not under(where, covered):
            covered = [root for root in covered if not under(root, [where])] + [where]
    seen: dict[str, Entry] = {}
    for root in covered:
        seen.update(_walk(root, set(recorded)))
    for path, (kind, _) in list(seen.items()):
        if kind == LINK:
            _follow(path, covered, seen)
    special = sorted(path for path, (kind, _) in seen.items() if kind == OTHER)
    if special:
        raise IntegrityError(f"cannot seal the image: special files under its roots: {special}")
    listing = Listing(os.path.abspath(model_dir), tuple(covered), absent=tuple(sorted(set(absent))))
    kept = {path: entry for path, entry in seen.items() if path not in listing.unlisted()}
    return Listing(
        listing.model_dir,
        listing.roots,
        {path: value for path, (kind, value) in kept.items() if kind == FILE},
        {path: value for path, (kind, value) in kept.items() if kind == LINK},
        listing.absent,
    )


def observe_fs(listing: Listing) -> dict[str, Entry]:
    """What is at the listing's paths on this file system: every entry under its roots,
    each path outside them that exists (a directory at an absent path as OTHER); a
    missing path is not in the result."""
    recorded = listing.recorded()
    seen = {path: entry for root in listing.roots for path, entry in _walk(root, recorded)}
    for path in listing.outside():
        found = _entry(path)
        if found is None and os.path.isdir(path):
            found = (OTHER, "")
        if found is not None:
            seen[path] = found
    return seen


def check(listing: Listing, seen: Mapping[str, Entry], where: str) -> None:
    """Compare ``seen`` (:func:`observe_fs`, or the image's streamed bytes) with
    ``listing``.

    Raises:
        IntegrityError: a listed file or link changed or is missing, a path is there that
            the listing does not hold (an added file, an ``absent`` entry created), naming
            up to three of them and how many differ in all.
    """
    expected = {path: (FILE, digest) for path, digest in listing.files.items()}
    expected |= {path: (LINK, target) for path, target in listing.links.items()}
    skipped = listing.unlisted()
    wrong: list[str] = []
    for path, entry in sorted(seen.items()):
        signed = expected.get(path)
        if path in skipped or signed == entry:
            continue
        if signed is not None:
            wrong.append(f"{path}: {_describe(entry)}, signed as {_describe(signed)}")
        elif path in listing.absent:
            wrong.append(f"{path}: created on the interpreter's path (signed as absent)")
        else:
            wrong.append(f"{path}: added (not in the signed listing)")
    wrong += [
        f"{path}: missing (signed as {_describe(entry)})"
        for path, entry in sorted(expected.items())
        if path not in seen
    ]
    if wrong:
        raise IntegrityError(
            f"{where}: {len(wrong)} path(s) differ from the image's signed file listing: "
            + "; ".join(wrong[:3])
            + ("; ..." if len(wrong) > 3 else "")
            + "; the image was changed after it was built, refusing it"
        )


def file_digest(path: str) -> str:
    """blake3 hex of the file at ``path`` (threads for big files)."""
    if os.path.getsize(path) >= BIG_FILE:
        hasher = blake3.blake3(max_threads=blake3.blake3.AUTO)
        hasher.update_mmap(path)
        return hasher.hexdigest()
    with open(path, "rb") as stream:
        return blake3.blake3(stream.read()).hexdigest()


def _walk(top: str, recorded: Collection[str] = ()) -> Iterable[tuple[str, Entry]]:
    """Every non-directory entry at or under ``top`` (links not followed); the files in
    ``recorded`` are not hashed (:data:`RECORDED`)."""
    entry = _entry(top, recorded)
    if entry is not None:
        yield top, entry
        return
    for folder, dirs, files in os.walk(top):
        for name in (*dirs, *files):
            path = os.path.join(folder, name)
            found = _entry(path, recorded)
            if found is not None:
                yield path, found


def _entry(path: str, recorded: Collection[str] = ()) -> Entry | None:
    """The entry at ``path``: a link, a file (:data:`RECORDED` when in ``recorded``),
    another non-directory (OTHER); None for a directory or nothing."""
    if os.path.islink(path):
        return (LINK, os.readlink(path))
    if os.path.isfile(path):
        return (FILE, RECORDED if path in recorded else file_digest(path))
    if os.path.lexists(path) and not os.path.isdir(path):
        return (OTHER, "")
    return None


def _follow(link: str, roots: list[str], seen: dict[str, Entry]) -> None:
    """Add each step of the link chain from ``link`` that leaves ``roots`` to ``seen``:
    the links on the way and the file at its end (a directory at its end becomes a root)."""
    path = link
    for _ in range(40):  # the kernel's own limit on a chain of links
        target = os.path.join(os.path.realpath(os.path.dirname(path)), os.readlink(path))
        path = os.path.normpath(target)
        if under(path, roots):
            return
        if os.path.isdir(path) and not os.path.islink(path):
            roots.append(path)
            seen.update(_walk(path))
            return
        entry = _entry(path)
        if entry is None:
            return
        seen[path] = entry
        if entry[0] != LINK:
            return


def _describe(entry: Entry) -> str:
    kind, value = entry
    if kind == FILE:
        return (
            "a file (its digests in the manifest)"
            if value == RECORDED
            else f"a file of blake3:{value[:16]}..."
        )
    if kind == LINK:
        return f"a link to {value}"
    return "a special file or directory"
