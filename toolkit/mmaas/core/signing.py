"""Engine signatures: an Ed25519 signature over the manifest's own digest, checked with
trusted public keys.

What is signed is ``manifest_digest`` (the sha256 of the canonical JSON of every other
manifest field), which covers every engine file's and asset's blake3 + sha256, the
signature, the profile and the build facts; so one signature vouches for everything the
server loads, and the usual hash checks tie the files to it. The signed message is
:data:`CONTEXT` + the digest text (a fixed prefix, so a signature made here cannot be
replayed as a signature of anything else).

The signature travels as :data:`SIGNATURE_NAME` beside ``manifest.json`` (JSON:
algorithm, key id, the signed digest, the base64 signature) and as image labels
(:mod:`mmaas.build.signing`). Public keys are PEM ``SubjectPublicKeyInfo`` files, as
``openssl pkey -pubout`` writes them; a key id is ``ed25519:`` + the first 16 hex digits
of the sha256 of the raw 32-byte key. ``cryptography`` is imported only when a signature
is checked: images built without ``--sign`` do not carry it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mmaas.core.errors import IntegrityError, UsageError

SIGNATURE_NAME = "manifest.sig.json"
ALGORITHM = "ed25519"
CONTEXT = b"mmaas manifest signature v1\n"
_PEM = re.compile(r"-----BEGIN [A-Z ]+-----[^-]+-----END [A-Z ]+-----")


@dataclass(frozen=True)
class Signature:
    """A manifest signature: ``algorithm`` (``ed25519``), ``key_id`` of the signing key,
    the ``manifest_digest`` it signs and the 64-byte ``signature`` (base64)."""

    algorithm: str
    key_id: str
    manifest_digest: str
    signature: str

    def to_json(self) -> str:
        """The signature file's text."""
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, where: str) -> Signature:
        """Read :meth:`to_json`'s text. Raises IntegrityError naming ``where``."""
        try:
            raw = json.loads(text)
            return cls(**{key: str(raw[key]) for key in cls.__dataclass_fields__})
        except (ValueError, KeyError, TypeError) as exc:
            raise IntegrityError(f"{where}: malformed signature ({exc})") from exc


@dataclass(frozen=True)
class PublicKey:
    """A trusted Ed25519 public key: its raw 32 bytes and where it came from."""

    raw: bytes
    origin: str

    @property
    def key_id(self) -> str:
        """``ed25519:<first 16 hex of sha256(raw)>``."""
        return key_id(self.raw)


def key_id(raw: bytes) -> str:
    """The id of a raw 32-byte Ed25519 public key."""
    return f"{ALGORITHM}:{hashlib.sha256(raw).hexdigest()[:16]}"


def message(manifest_digest: str) -> bytes:
    """The bytes signed for ``manifest_digest``: :data:`CONTEXT` + the digest text."""
    return CONTEXT + manifest_digest.encode()


def read_signature(directory: Path) -> Signature | None:
    """The signature beside ``directory``'s manifest, or None when it is unsigned.

    Raises:
        IntegrityError: the file is unreadable or malformed.
    """
    path = directory / SIGNATURE_NAME
    if not path.is_file():
        return None
    try:
        return Signature.from_json(path.read_text(), str(path))
    except OSError as exc:
        raise IntegrityError(f"{path}: unreadable signature ({exc})") from exc


def parse_public_keys(text: str, origin: str) -> list[PublicKey]:
    """Every Ed25519 public key in the PEM blocks of ``text``.

    Raises:
        UsageError: ``text`` holds no PEM block, or one that is not an Ed25519 public key
            (naming ``origin`` and the fix).
    """
    blocks = _PEM.findall(text)
    if not blocks:
        raise UsageError(
            f"{origin}: no PEM public key in it",
            hint="give an Ed25519 public key: `openssl pkey -in signing.pem -pubout`",
        )
    return [PublicKey(_raw_public_key(block, origin), origin) for block in blocks]


def read_public_key_text(path: Path) -> str:
    """The text of a public key file, checked to hold Ed25519 public keys.

    Raises:
        UsageError: the file is missing or holds no Ed25519 public key.
    """
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read the public key ({exc})") from exc
    parse_public_keys(text, str(path))
    return text


def trusted_keys(setting: str) -> list[PublicKey]:
    """The keys ``MMAAS_TRUSTED_KEYS`` names: PEM text itself (one or more blocks), or a
    comma-separated list of PEM public key files.

    Raises:
        UsageError: a file is missing, or holds no Ed25519 public key.
    """
    if "-----BEGIN" in setting:
        return parse_public_keys(setting, "MMAAS_TRUSTED_KEYS")
    keys: list[PublicKey] = []
    for entry in filter(None, (part.strip() for part in setting.split(","))):
        keys += parse_public_keys(read_public_key_text(Path(entry)), entry)
    if not keys:
        raise UsageError("MMAAS_TRUSTED_KEYS is set but names no key file")
    return keys


def verify_trusted(directory: Path, manifest_digest: str, setting: str, where: str) -> PublicKey:
    """Check that the model directory ``directory`` is signed, for ``manifest_digest``, by
    a key ``setting`` names (:func:`trusted_keys`); return that key. An unsigned directory
    is refused before any key is read (an unsigned image need not carry ``cryptography``).

    Raises:
        IntegrityError: unsigned, or the signature does not hold (:func:`verify_signature`);
            also when ``cryptography`` is missing. UsageError: a key cannot be read.
    """
    signature = read_signature(directory)
    if signature is None:
        raise IntegrityError(
            f"{where}: the engine is unsigned, but trusted keys are set (only a signed "
            "engine may run); refusing it",
            hint="build it with `mmaas build --sign KEY`, or trust unsigned engines (the "
            "server: unset MMAAS_TRUSTED_KEYS; mmaas verify: drop --key)",
        )
    try:
        keys = trusted_keys(setting)
    except ImportError:
        raise IntegrityError(
            f"{where}: a signature is present, but this environment lacks the cryptography "
            "package to check it; refusing it (images built with --sign carry it)"
        ) from None
    return verify_signature(signature, manifest_digest, keys, where)


def verify_signature(
    signature: Signature, manifest_digest: str, keys: Sequence[PublicKey], where: str
) -> PublicKey:
    """Check that ``signature`` signs ``manifest_digest`` with one of ``keys``; return
    that key.

    Raises:
        IntegrityError: another algorithm, a signature of another manifest, a key id none
            of ``keys`` has, or a signature that does not verify (the manifest or the
            signature was altered); each names ``where`` and the key ids.
    """
    trusted = ", ".join(key.key_id for key in keys)
    if signature.algorithm != ALGORITHM:
        raise IntegrityError(
            f"{where}: signature algorithm {signature.algorithm!r}, only {ALGORITHM} is accepted"
        )
    if signature.manifest_digest != manifest_digest:
        raise IntegrityError(
            f"{where}: the signature is of manifest {signature.manifest_digest}, but the "
            f"manifest is {manifest_digest}; refusing it"
        )
    matching = [key for key in keys if key.key_id == signature.key_id]
    if not matching:
        raise IntegrityError(
            f"{where}: signed by key {signature.key_id}, which is not trusted "
            f"(trusted: {trusted}); refusing it"
        )
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        raw = base64.b64decode(signature.signature, validate=True)
        Ed25519PublicKey.from_public_bytes(matching[0].raw).verify(raw, message(manifest_digest))
    except (InvalidSignature, binascii.Error, ValueError):
        raise IntegrityError(
            f"{where}: the signature does not verify with key {signature.key_id}: the "
            "manifest or its signature was altered; refusing it"
        ) from None
    return matching[0]


def _raw_public_key(block: str, origin: str) -> bytes:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    hint = "give an Ed25519 public key (`openssl pkey -in signing.pem -pubout`)"
    try:
        key: Any = serialization.load_pem_public_key(block.encode())
    except ValueError:
        if "PRIVATE KEY" in block:
            raise UsageError(f"{origin}: a private key; give the public key", hint=hint) from None
        raise UsageError(f"{origin}: not a PEM public key", hint=hint) from None
    if not isinstance(key, Ed25519PublicKey):
        raise UsageError(f"{origin}: a {type(key).__name__}, not an Ed25519 key", hint=hint)
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
