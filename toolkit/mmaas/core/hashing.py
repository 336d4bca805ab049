"""Streaming file digests in the ``algo:<hex>`` form used by manifests and labels.

blake3 is the engine's identity (fast on multi-GB engines); sha256 is recorded beside
it because OCI and most registries speak sha256.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import blake3

CHUNK_BYTES = 1 << 20


def file_digests(path: Path) -> dict[str, str]:
    """Read ``path`` once and return ``{"blake3": "blake3:<hex>", "sha256": "sha256:<hex>"}``.

    Raises:
        OSError: the file cannot be read.
    """
    b3 = blake3.blake3()
    s256 = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(CHUNK_BYTES):
            b3.update(chunk)
            s256.update(chunk)
    return {"blake3": f"blake3:{b3.hexdigest()}", "sha256": f"sha256:{s256.hexdigest()}"}


def bytes_digest(data: bytes, algo: str = "sha256") -> str:
    """Digest of an in-memory byte string as ``algo:<hex>`` (``sha256`` or ``blake3``)."""
    if algo == "blake3":
        return f"blake3:{blake3.blake3(data).hexdigest()}"
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


def matches(path: Path, expected: str) -> bool:
    """True when ``path``'s digest equals ``expected`` (``sha256:<hex>`` or ``blake3:<hex>``)."""
    algo = expected.split(":", 1)[0]
    return file_digests(path).get(algo) == expected
