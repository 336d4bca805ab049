"""Test certificates made by the real ``openssl`` (through :mod:`mmaas.core.proc`): a
self-signed one, and a CA with a server and a client certificate signed by it."""

from __future__ import annotations

from pathlib import Path

from mmaas.core.proc import run

KEY_ARGS = ["-newkey", "rsa:2048", "-nodes", "-days", "1"]


def self_signed(cert: Path, key: Path, subject: str, *extensions: str) -> None:
    """Write a self-signed RSA-2048 certificate for ``subject`` (``/CN=...``), valid one
    day, to ``cert`` and its unencrypted key to ``key`` (both PEM); each of
    ``extensions`` (``subjectAltName=IP:127.0.0.1``) is added with ``-addext``."""
    added = [arg for extension in extensions for arg in ("-addext", extension)]
    argv = ["openssl", "req", "-x509", *KEY_ARGS, "-subj", subject]
    run([*argv, "-keyout", str(key), "-out", str(cert), *added])


def make_certificates(directory: Path) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, signed by it:
    PEM paths under ``directory`` keyed ``ca``, ``ca-key``, ``server``, ``server-key``,
    ``client``, ``client-key``."""
    paths = {
        name: directory / f"{name}.pem"
        for name in ("ca", "ca-key", "server", "server-key", "client", "client-key")
    }
    self_signed(paths["ca"], paths["ca-key"], "/CN=mmaas test CA")
    for name, extension in (
        ("server", "subjectAltName=IP:127.0.0.1"),
        ("client", "extendedKeyUsage=clientAuth"),
    ):
        request = directory / f"{name}.csr"
        extfile = directory / f"{name}.ext"
        extfile.write_text(extension + "\n")
        run(
            [
                "openssl",
                "req",
                "-new",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                f"/CN=mmaas test {name}",
                "-keyout",
                str(paths[f"{name}-key"]),
                "-out",
                str(request),
            ]
        )
        run(
            [
                "openssl",
                "x509",
                "-req",
                "-in",
                str(request),
                "-CA",
                str(paths["ca"]),
                "-CAkey",
                str(paths["ca-key"]),
                "-CAcreateserial",
                "-days",
                "1",
                "-extfile",
                str(extfile),
                "-out",
                str(paths[name]),
            ]
        )
    return paths
