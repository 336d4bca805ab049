"""Resolve a model's ``source`` (model.yaml) to a local, pin-checked ONNX file.

``source.path`` is a file relative to the model folder (or absolute); ``source.url`` is an
``https`` address that must be pinned by ``sha256`` or ``blake3`` (hex). Only ``https``
is accepted: ``http`` can be altered in transit and ``file://`` would hide a local path
from the checks a ``path`` gets (use ``path`` for local files).

Downloads go to a content-addressed cache, ``$MMAAS_CACHE_DIR/sources`` (default
``~/.cache/mmaas/sources``), named by the pin, written to a temp file and renamed only
after the pin matched, under a file lock so parallel builds share one download. TLS
trusts the system store; behind a TLS-intercepting proxy set ``SSL_CERT_FILE`` to its
CA bundle.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import urllib.error
import urllib.request
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from filelock import FileLock

from mmaas.core.errors import SourceError
from mmaas.core.hashing import file_digests
from mmaas.spec.model import SourceSpec

DOWNLOAD_TIMEOUT_S = 60
CHUNK_BYTES = 1 << 20


def cache_dir() -> Path:
    """The download cache: ``$MMAAS_CACHE_DIR/sources``, default ``~/.cache/mmaas/sources``."""
    root = os.environ.get("MMAAS_CACHE_DIR") or "~/.cache/mmaas"
    return Path(root).expanduser() / "sources"


def pins_of(source: SourceSpec) -> list[str]:
    """The source's pins as ``algo:<hex>`` strings (sha256 first), possibly empty."""
    return [
        f"{algo}:{value}"
        for algo, value in (("sha256", source.sha256), ("blake3", source.blake3))
        if value
    ]


def resolve_source(source: SourceSpec, model_dir: Path) -> Path:
    """Return the local ONNX file for ``source``, downloading and pin-checking a URL.

    Raises:
        SourceError: neither or both of path/url given; a URL that is not https or has no
            pin; a missing file; a download failure; a file whose digest differs from a pin.
    """
    if (source.path is None) == (source.url is None):
        raise SourceError(
            "give exactly one of source.path (a local ONNX file) or source.url "
            "(an https address pinned by sha256 or blake3)"
        )
    if source.path is not None:
        path = model_dir / source.path
        if not path.is_file():
            raise SourceError(
                f"{path}: no such file; fix source.path (it is relative to "
                "the model folder) or fetch the model first"
            )
        check_pins(path, pins_of(source))
        return path
    return fetch_url(source.url or "", pins_of(source))


def check_pins(path: Path, pins: list[str]) -> None:
    """Check ``path`` against every ``algo:<hex>`` pin (sha256, blake3) in one read.

    Raises:
        SourceError: a digest differs; names both values and what to do.
    """
    if not pins:
        return
    actual = file_digests(path)
    for pin in pins:
        algo = pin.split(":", 1)[0]
        if actual[algo] != pin:
            raise SourceError(
                f"{path}: {algo} is {actual[algo].split(':', 1)[1]}, but the spec "
                f"pins {pin.split(':', 1)[1]}; the file changed: fetch the right "
                f"one, or update source.{algo} if the change is intended"
            )


def fetch_url(url: str, pins: list[str]) -> Path:
    """Download ``url`` into the cache (once) and return the pin-checked local file.

    Raises:
        SourceError: not https, no pin, the download fails, or the content fails its pin
            (nothing is kept then).
    """
    if urlsplit(url).scheme != "https":
        raise SourceError(f"{url}: only https URLs are accepted; for a local file use source.path")
    if not pins:
        raise SourceError(
            f"{url}: a URL source needs a pin: add source.sha256 (or "
            "source.blake3) with the file's hex digest"
        )
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    suffix = PurePosixPath(urlsplit(url).path).suffix
    target = directory / (pins[0].replace(":", "-") + suffix)
    with FileLock(str(target) + ".lock"):
        if not target.is_file():
            _download(url, target, pins)
        check_pins(target, pins)
    return target


def _download(url: str, target: Path, pins: list[str]) -> None:
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        with (
            os.fdopen(fd, "wb") as out,
            urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response,
        ):
            shutil.copyfileobj(response, out, CHUNK_BYTES)
        try:
            check_pins(tmp, pins)
        except SourceError as exc:
            raise SourceError(f"{url}: downloaded file fails its pin: {exc.message}") from None
        os.replace(tmp, target)
    except (urllib.error.URLError, OSError) as exc:
        raise SourceError(
            f"{url}: download failed ({_reason(exc)}); check the address and the "
            "network (behind a TLS-intercepting proxy, set SSL_CERT_FILE to "
            "its CA bundle)"
        ) from exc
    finally:
        tmp.unlink(missing_ok=True)


def _reason(exc: OSError) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    return str(getattr(exc, "reason", None) or exc)
