"""``mmaas export kserve``: the Kubernetes objects of a verified image, written as YAML
files into one folder (``kubectl apply -f DIR``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mmaas.core.signing import read_public_key_text
from mmaas.export.kserve import Mode, Protocol, kserve_objects
from mmaas.export.output import to_yaml, write_folder
from mmaas.export.plain import plain_objects
from mmaas.export.source import ExportSource, Say, export_source


@dataclass(frozen=True)
class ManifestExport:
    """What was written: the folder, its files, the image reference the objects pull and
    whether a digest pins it."""

    out_dir: Path
    files: tuple[str, ...]
    image: str
    pinned: bool


def export_kubernetes(
    model: Path,
    out_dir: Path,
    *,
    image: str | None,
    plain: bool,
    mode: Mode,
    protocol: Protocol,
    trusted_key: Path | None,
    say: Say,
) -> ManifestExport:
    """Write the KServe objects (or with ``plain``, the Deployment, Service, HPA and PDB) of
    ``model``'s verified image into ``out_dir``, KServe routing ``protocol`` in ``mode``.
    ``trusted_key``: a public key file whose
    key the server must find the engine signed with (``MMAAS_TRUSTED_KEYS``).

    Raises:
        SpecError, UsageError, IntegrityError, DockerError: see
            :func:`mmaas.export.source.export_source`; UsageError also for an unusable
            ``out_dir`` or a key file that holds no Ed25519 public key.
    """
    keys = read_public_key_text(trusted_key) if trusted_key else None
    source = export_source(model, image, say)
    files = write_kubernetes(source, out_dir, plain=plain, mode=mode, protocol=protocol, keys=keys)
    return ManifestExport(out_dir, files, source.reference, source.pinned)


def write_kubernetes(
    source: ExportSource,
    out_dir: Path,
    *,
    plain: bool,
    mode: Mode,
    protocol: Protocol,
    keys: str | None,
) -> tuple[str, ...]:
    """Write ``source``'s objects (one YAML file each) and the export record into
    ``out_dir``; returns the YAML files' names. ``keys``: the trusted public keys' PEM
    text (``MMAAS_TRUSTED_KEYS``), or None.

    Raises:
        UsageError: ``out_dir`` is unusable (:func:`mmaas.export.output.check_target`).
    """
    objects = plain_objects(source, keys) if plain else kserve_objects(source, mode, protocol, keys)
    record = {
        "kind": "plain" if plain else f"kserve-{mode}-{protocol}",
        "model": source.spec.name,
        "version": source.spec.version,
        "image": source.reference,
        "manifest_digest": source.model_manifest.manifest_digest,
    }
    write_folder(out_dir, {name: to_yaml(obj) for name, obj in objects.items()}, record)
    return tuple(objects)
