"""``mmaas build --sign KEY``: sign the built manifest's digest with an Ed25519 private key.

The key is a PEM PKCS#8 private key (``openssl genpkey -algorithm ed25519 -out
signing.pem``), read from a file or, with ``env:NAME``, from the environment variable
NAME (CI: a repository secret). An encrypted key's password comes from
``MMAAS_SIGNING_KEY_PASSWORD``. The key is read on the host, before any Docker work, and
only the signature leaves this process: it is never written into a build context, a
layer, a label or a log (error messages name the file or variable, never its content).
The signature goes into the image as ``/opt/mmaas/model/manifest.sig.json`` and as the
labels of :func:`signature_labels`; the signed message is :func:`mmaas.core.signing.message`.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmaas.core.errors import IntegrityError, UsageError
from mmaas.core.signing import ALGORITHM, SIGNATURE_NAME, Signature, key_id, message

PASSWORD_ENV = "MMAAS_SIGNING_KEY_PASSWORD"
LABEL_SIGNATURE = "io.mmaas.signature"
LABEL_KEY_ID = "io.mmaas.signature.key-id"
LABEL_PATH = "io.mmaas.signature.path"
HINT = "make one with `openssl genpkey -algorithm ed25519 -out signing.pem`"


@dataclass(frozen=True)
class SigningKey:
    """A loaded Ed25519 private key (never shown in repr) and where it came from."""

    origin: str
    key: Any = field(repr=False)

    @property
    def key_id(self) -> str:
        """The id of its public key (:func:`mmaas.core.signing.key_id`)."""
        from cryptography.hazmat.primitives import serialization

        raw = self.key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        return key_id(raw)

    def sign(self, manifest_digest: str) -> Signature:
        """The signature of ``manifest_digest``."""
        raw = self.key.sign(message(manifest_digest))
        return Signature(ALGORITHM, self.key_id, manifest_digest, base64.b64encode(raw).decode())


def load_signing_key(source: str, env: Mapping[str, str] = os.environ) -> SigningKey:
    """Load the private key ``source`` names: a PEM file path, or ``env:NAME``.

    Raises:
        UsageError: the file or variable is missing or empty, or holds no Ed25519 private
            key (a public key, another algorithm, a wrong password, not PEM).
    """
    if source.startswith("env:"):
        name = source[4:]
        text = env.get(name, "")
        if not text.strip():
            raise UsageError(f"--sign {source}: the environment variable {name} is unset or empty")
        data, origin = text.encode(), f"${name}"
    else:
        try:
            data, origin = Path(source).read_bytes(), source
        except OSError as exc:
            raise UsageError(
                f"--sign {source}: cannot read the key file ({exc.strerror})"
            ) from None
    return SigningKey(origin, _private_key(data, origin, env.get(PASSWORD_ENV)))


def signature_labels(signature: Signature, model_dir: str) -> dict[str, str]:
    """The image labels of ``signature``: the base64 signature, its key id and the path
    of the signature file in the image."""
    return {
        LABEL_SIGNATURE: signature.signature,
        LABEL_KEY_ID: signature.key_id,
        LABEL_PATH: f"{model_dir}/{SIGNATURE_NAME}",
    }


def check_signature_labels(
    image: str, labels: Mapping[str, str], signature: Signature | None
) -> None:
    """Raise IntegrityError when the image's signature labels differ from its signature
    file (or one exists without the other)."""
    labelled = labels.get(LABEL_SIGNATURE)
    if signature is None and labelled is None:
        return
    if (
        signature is None
        or labelled != signature.signature
        or (labels.get(LABEL_KEY_ID) != signature.key_id)
    ):
        raise IntegrityError(
            f"{image}: the {LABEL_SIGNATURE} labels and the signature file "
            f"{SIGNATURE_NAME} disagree; refusing it"
        )


def _private_key(data: bytes, origin: str, password: str | None) -> Any:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    if b"PRIVATE KEY" not in data:
        what = "a public key" if b"PUBLIC KEY" in data else "not a PEM private key"
        raise UsageError(f"--sign {origin}: {what}; signing needs the private key", hint=HINT)
    try:
        key = serialization.load_pem_private_key(
            data, password=password.encode() if password else None
        )
    except TypeError:
        raise UsageError(
            f"--sign {origin}: the key is encrypted; set {PASSWORD_ENV}", hint=HINT
        ) from None
    except ValueError:
        raise UsageError(
            f"--sign {origin}: not a readable PEM private key (or a wrong {PASSWORD_ENV})",
            hint=HINT,
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise UsageError(
            f"--sign {origin}: a {type(key).__name__}; mmaas signs with Ed25519 keys", hint=HINT
        )
    return key
