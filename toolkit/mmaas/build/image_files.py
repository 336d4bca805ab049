"""What a built image holds at the paths of its file listing
(:mod:`mmaas.core.file_listing`), read from the image's own bytes: each root and each
path outside them streamed out of a created (never started) container as the tar archive
``docker cp`` writes, and hashed as it streams (no copy on disk, no code of the image
run). ``mmaas verify`` and ``mmaas export`` compare the result with the signed listing.
"""

from __future__ import annotations

import posixpath
import tarfile
from typing import IO

import blake3

from mmaas.build import docker as docker_engine
from mmaas.core.file_listing import FILE, LINK, OTHER, RECORDED, Entry, Listing

CHUNK_BYTES = 1 << 20


def observe_image(image: str, listing: Listing) -> dict[str, Entry]:
    """Every non-directory entry under the listing's roots in ``image`` and each of its
    paths outside them that exists there (a directory at such a path as OTHER), by
    absolute path: the same map :func:`mmaas.core.file_listing.observe_fs` makes of a
    running file system.

    Raises:
        DockerError: no such local image, or docker cp fails for another reason than a
            missing path.
    """
    seen: dict[str, Entry] = {}
    recorded = listing.recorded()
    with docker_engine.created(image) as container:
        for root in listing.roots:
            seen |= _stream(container, root, recorded)
            seen.pop(root + "/", None)
        for path in listing.outside():
            found = _stream(container, path, recorded)
            if found.pop(path + "/", None) is not None:  # a directory: what is inside is moot
                found = {path: (OTHER, "")}
            seen |= found
    return seen


def _stream(container: str, path: str, recorded: set[str]) -> dict[str, Entry]:
    """The entries of ``path`` in ``container`` (none when it has no ``path``)."""
    found: dict[str, Entry] = {}

    def consume(stream: IO[bytes]) -> None:
        _read(stream, path, found, recorded)

    docker_engine.stream_path(container, path, consume)
    return found


def _read(stream: IO[bytes], path: str, seen: dict[str, Entry], recorded: set[str]) -> None:
    """Add the entries of the tar ``stream`` of ``path`` to ``seen`` (a directory member
    of ``path`` itself is noted under the key ``path + "/"``; the files in ``recorded``,
    which the manifest records by hash, are not hashed)."""
    parent = posixpath.dirname(path.rstrip("/"))
    digests: dict[str, Entry] = {}
    try:
        archive = tarfile.open(fileobj=stream, mode="r|")  # noqa: SIM115 (closed below)
    except tarfile.ReadError:  # nothing streamed: docker cp found no such path
        return
    with archive:
        for member in archive:
            name = posixpath.join(parent, member.name)
            if member.isdir():
                if name == path:
                    seen[path + "/"] = (OTHER, "")
                continue
            if member.issym():
                seen[name] = (LINK, member.linkname)
            elif member.islnk():  # a hard link: the content of the member it names
                seen[name] = digests[member.linkname]
            elif member.isfile() and name in recorded:
                seen[name] = digests[member.name] = (FILE, RECORDED)
            elif member.isfile():
                content = archive.extractfile(member)
                assert content is not None  # a regular file member has content
                hasher = blake3.blake3()
                while chunk := content.read(CHUNK_BYTES):
                    hasher.update(chunk)
                seen[name] = digests[member.name] = (FILE, hasher.hexdigest())
            else:
                seen[name] = (OTHER, "")
