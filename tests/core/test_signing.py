"""Engine signatures: Ed25519 over the manifest digest (mmaas.core.signing on the
checking side, mmaas.build.signing on the signing side), with keys made by openssl as the
README tells users to, and by the cryptography package."""

from __future__ import annotations

import base64
from dataclasses import replace
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from export_models import openssl_key
from mmaas.build.signing import load_signing_key
from mmaas.core.errors import IntegrityError, UsageError
from mmaas.core.signing import SIGNATURE_NAME, Signature, verify_trusted

DIGEST = "sha256:" + "5a" * 32


def signed_dir(folder: Path, signature: Signature) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / SIGNATURE_NAME).write_text(signature.to_json())
    return folder


def test_openssl_key_signs_and_its_public_key_verifies(tmp_path: Path) -> None:
    private, public = openssl_key(tmp_path, "ci")
    key = load_signing_key(str(private))
    signature = key.sign(DIGEST)
    model = signed_dir(tmp_path / "model", signature)
    assert verify_trusted(model, DIGEST, str(public), "model").key_id == key.key_id
    assert signature.key_id.startswith("ed25519:") and len(signature.key_id) == 24


def test_key_from_the_environment_and_pem_text_as_trusted_keys(tmp_path: Path) -> None:
    private, public = openssl_key(tmp_path, "ci")
    key = load_signing_key("env:CI_KEY", {"CI_KEY": private.read_text()})
    model = signed_dir(tmp_path / "model", key.sign(DIGEST))
    _, other = openssl_key(tmp_path, "other")
    both = other.read_text() + public.read_text()  # MMAAS_TRUSTED_KEYS holding PEM text
    assert verify_trusted(model, DIGEST, both, "model").key_id == key.key_id
    assert verify_trusted(model, DIGEST, f"{other},{public}", "model").key_id == key.key_id


def test_a_signature_by_another_key_is_refused(tmp_path: Path) -> None:
    private, _ = openssl_key(tmp_path, "ci")
    _, other = openssl_key(tmp_path, "other")
    model = signed_dir(tmp_path / "model", load_signing_key(str(private)).sign(DIGEST))
    with pytest.raises(IntegrityError, match="which is not trusted"):
        verify_trusted(model, DIGEST, str(other), "model")


def test_altered_manifest_or_signature_is_refused(tmp_path: Path) -> None:
    private, public = openssl_key(tmp_path, "ci")
    signature = load_signing_key(str(private)).sign(DIGEST)
    model = signed_dir(tmp_path / "model", signature)
    with pytest.raises(IntegrityError, match="signature is of manifest"):
        verify_trusted(model, "sha256:" + "00" * 32, str(public), "model")
    flipped = bytearray(base64.b64decode(signature.signature))
    flipped[0] ^= 1
    forged = replace(signature, signature=base64.b64encode(bytes(flipped)).decode())
    signed_dir(model, forged)
    with pytest.raises(IntegrityError, match="does not verify"):
        verify_trusted(model, DIGEST, str(public), "model")


def test_unsigned_is_refused_when_keys_are_trusted(tmp_path: Path) -> None:
    _, public = openssl_key(tmp_path, "ci")
    (tmp_path / "model").mkdir()
    with pytest.raises(IntegrityError, match="unsigned"):
        verify_trusted(tmp_path / "model", DIGEST, str(public), "model")


@pytest.mark.parametrize(
    "content, message",
    [
        (b"not a key at all\n", "not a PEM private key"),
        ("public", "a public key"),
        ("rsa", "RSAPrivateKey"),
    ],
)
def test_a_key_file_that_is_not_an_ed25519_private_key(
    tmp_path: Path, content: object, message: str
) -> None:
    path = tmp_path / "key.pem"
    if content == "public":
        openssl_key(tmp_path, "k")
        path = tmp_path / "k.pub"
    elif content == "rsa":
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    else:
        path.write_bytes(content)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=message) as raised:
        load_signing_key(str(path))
    assert raised.value.exit_code == 2


def test_errors_never_show_the_key(tmp_path: Path) -> None:
    key = ed25519.Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret-password"),
    ).decode()
    with pytest.raises(UsageError) as raised:
        load_signing_key("env:K", {"K": pem})
    body = pem.splitlines()[1]
    assert "encrypted" in str(raised.value) and body not in str(raised.value)
    loaded = load_signing_key("env:K", {"K": pem, "MMAAS_SIGNING_KEY_PASSWORD": "secret-password"})
    assert body not in repr(loaded)
    with pytest.raises(UsageError, match="unset or empty"):
        load_signing_key("env:MISSING", {})
