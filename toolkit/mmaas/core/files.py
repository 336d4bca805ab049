"""Writing files and directories so that readers see them whole or not at all.

:func:`atomic_write_text` (temp file + rename), :func:`assembled` (a directory built beside
its target and renamed into place) and :func:`link_or_copy` (hard links for large engines,
a copy across file systems). Every artefact mmaas writes goes through these.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def atomic_write_text(target: Path, text: str) -> None:
    """Write ``text`` to ``target`` via a temp file in the same directory and a rename."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def assembled(out_dir: Path) -> Iterator[Path]:
    """A sibling temp directory (mode 0755: readable by the runtime's non-root user) that
    replaces ``out_dir`` when the block succeeds and is removed when it fails, so a model
    directory appears whole or not at all."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}."))
    work.chmod(0o755)
    try:
        yield work
        if out_dir.exists():
            shutil.rmtree(out_dir)
        work.rename(out_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def link_or_copy(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
    """Hard-link ``source`` to ``target`` (large engines cost no copy), or copy it (with
    its times and mode) across file systems; usable as ``shutil.copytree``'s
    ``copy_function``. A symbolic link is followed: ``target`` holds the file's bytes,
    never the link (Python 3.11's :func:`os.link` links the link itself, whose path means
    nothing inside a build context)."""
    source = os.path.realpath(source)
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
