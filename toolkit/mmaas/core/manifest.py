"""The build <-> serve contract: ``manifest.json`` beside the engine.

The builder stage (``mmaas.stage.build``) writes it; the image build, ``mmaas verify`` and
the runtime server read it and check the engine against it. It carries everything the
server needs (tensor names, KServe v2 datatypes, shapes and the optimization profile),
so the server never reads model.yaml. Plain dataclasses + json: the runtime image needs
no pydantic or YAML loader.

Layout of a model directory (``/opt/mmaas/model`` in an image)::

    manifest.json   this contract (schema_version 2; an image's model directory holds the
                    model manifest over one or more of these: mmaas.core.model_manifest)
    <engine file>   e.g. model.ort.onnx (ONNX Runtime) or model.plan (TensorRT)
    <engine data>   files the engine loads beside it, e.g. model.ort.onnx.data (the ONNX
                    external data format: the weights of an ONNX engine, needed > 2 GiB)
    report.json     the build report (profile check timings, tool output summary)
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from mmaas.core.errors import IntegrityError
from mmaas.core.files import atomic_write_text
from mmaas.core.hashing import bytes_digest, file_digests
from mmaas.core.sample_values import SampleValues

SCHEMA_VERSION = 2  # 2: ``engine_data`` records the engine's data files
MANIFEST_NAME = "manifest.json"


@dataclass(frozen=True)
class TensorInfo:
    """One model input or output as served.

    Attributes:
        name: the exact tensor name in the ONNX graph (may hold ``.``, ``/``, ``:``).
        datatype: KServe v2 datatype string (``FP32``, ``FP16``, ``INT64``, ``BYTES``...).
        shape: full shape including the batch axis; ``-1`` marks a dynamic dim.
        min, opt, max: the optimization profile (inputs only; None for outputs).
        optional: a request may leave this input out (Triton's ``ModelInput.optional``;
            pipeline models only: an engine takes every input).
        sample_values: what the profile check, the gates and the warm-up feed this input
            (:mod:`mmaas.core.sample_values`); None: random data of its datatype.
    """

    name: str
    datatype: str
    shape: tuple[int, ...]
    min: tuple[int, ...] | None = None
    opt: tuple[int, ...] | None = None
    max: tuple[int, ...] | None = None
    optional: bool = False
    sample_values: SampleValues | None = None


@dataclass(frozen=True)
class ModelInfo:
    """What the model is and how it is served (KServe v2 ModelMetadata fields + profile)."""

    name: str
    version: str
    backend: str
    precision: str
    max_batch_size: int
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]


@dataclass(frozen=True)
class FileRecord:
    """A file next to the manifest, identified by its digests.

    Attributes:
        path: file name relative to the manifest's directory.
        blake3: ``blake3:<hex>``.
        sha256: ``sha256:<hex>``.
        size_bytes: size in bytes.
    """

    path: str
    blake3: str
    sha256: str
    size_bytes: int

    @classmethod
    def of(cls, directory: Path, name: str) -> FileRecord:
        """Hash ``directory / name`` and record it under ``name``."""
        target = directory / name
        digests = file_digests(target)
        return cls(
            path=name,
            blake3=digests["blake3"],
            sha256=digests["sha256"],
            size_bytes=target.stat().st_size,
        )


@dataclass(frozen=True)
class Manifest:
    """The whole manifest. ``backend`` holds the back end's name, version and portability
    facts (CPU flags for ONNX Runtime; GPU, compute capability, TensorRT/CUDA versions for
    TensorRT); ``build`` holds when/how it was built; ``report`` the build checks' results.
    ``engine`` is the file the back end opens, ``engine_data`` every other file it reads
    (external data, paths relative to the manifest's directory; empty for a self-contained
    engine): :func:`verify_engine` re-hashes them all. ``manifest_digest`` is the sha256 of the
    canonical JSON of every other field."""

    model: ModelInfo
    engine: FileRecord
    source: FileRecord
    spec_digest: str
    backend: dict[str, Any]
    build: dict[str, Any]
    report: dict[str, Any] = field(default_factory=dict)
    engine_data: tuple[FileRecord, ...] = ()
    schema_version: int = SCHEMA_VERSION
    manifest_digest: str = ""

    def sealed(self) -> Manifest:
        """This manifest with ``manifest_digest`` computed over every other field."""
        return replace(self, manifest_digest=seal_digest(asdict(self)))


def write_manifest(directory: Path, manifest: Manifest) -> Manifest:
    """Seal ``manifest`` and write it to ``directory/manifest.json`` atomically (temp file +
    rename); return the sealed manifest."""
    sealed = manifest.sealed()
    atomic_write_text(
        directory / MANIFEST_NAME, json.dumps(asdict(sealed), indent=2, sort_keys=True) + "\n"
    )
    return sealed


def read_manifest(directory: Path) -> Manifest:
    """Load and self-check ``directory/manifest.json``.

    Raises:
        IntegrityError: the file is missing, not valid JSON, of another schema version, or
            its ``manifest_digest`` does not match its content (it was edited).
    """
    path, raw = read_sealed(directory, {SCHEMA_VERSION: "an engine directory"})
    try:
        return manifest_from_dict(raw)
    except (KeyError, TypeError, ValueError) as exc:
        raise IntegrityError(f"{path}: malformed manifest ({exc})") from exc


def read_sealed(directory: Path, versions: dict[int, str]) -> tuple[Path, dict[str, Any]]:
    """The path and JSON object of ``directory/manifest.json`` once it is readable, of one
    of ``versions`` (``schema_version`` -> what a manifest of it describes) and sealed: its
    ``manifest_digest`` is :func:`seal_digest` of the rest.

    Raises:
        IntegrityError: the file is missing, not a JSON object, of another schema version
            (the message says which this mmaas reads), or edited after it was sealed.
    """
    path = directory / MANIFEST_NAME
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise IntegrityError(f"{path}: no manifest; this is not an mmaas model directory") from exc
    except (OSError, ValueError) as exc:
        raise IntegrityError(f"{path}: unreadable manifest ({exc})") from exc
    version = raw.get("schema_version") if isinstance(raw, dict) else None
    if version not in versions:
        readable = " and ".join(f"{number} ({what})" for number, what in versions.items())
        raise IntegrityError(
            f"{path}: schema_version {version!r}, this mmaas reads {readable}; rebuild the "
            "image with this mmaas"
        )
    expected = seal_digest(raw)
    if raw.get("manifest_digest") != expected:
        raise IntegrityError(
            f"{path}: manifest was altered after the build "
            f"(its digest is {expected}, it records {raw.get('manifest_digest')})"
        )
    return path, raw


def seal_digest(data: dict[str, Any]) -> str:
    """``blake3:<hex>`` of ``data``'s canonical JSON (sorted keys, no spaces) with
    ``manifest_digest`` blanked: the seal of schema 2 and 3 manifests."""
    canonical = json.dumps({**data, "manifest_digest": ""}, sort_keys=True, separators=(",", ":"))
    return bytes_digest(canonical.encode())


def verify_engine(directory: Path, manifest: Manifest) -> FileRecord:
    """Re-hash every engine file the manifest records (``engine`` and ``engine_data``) and
    compare both digests and the size of each.

    Returns the freshly computed record of the engine file itself. Raises:
        IntegrityError: an engine file is missing or differs from the manifest (naming it).
    """
    for recorded in manifest.engine_data:
        verify_file(directory, recorded, "engine data")
    return verify_file(directory, manifest.engine, "engine")


def verify_file(directory: Path, recorded: FileRecord, kind: str) -> FileRecord:
    """Re-hash ``directory / recorded.path`` and compare blake3, sha256 and size with
    ``recorded``; ``kind`` names the file in messages (``engine``, ``asset 'tokenizer'``).
    Returns the fresh record.

    Raises:
        IntegrityError: the file is missing or differs (naming it and both digests).
    """
    target = directory / recorded.path
    if not target.is_file():
        raise IntegrityError(f"{target}: {kind} file is missing")
    actual = FileRecord.of(directory, recorded.path)
    if (actual.blake3, actual.sha256, actual.size_bytes) != (
        recorded.blake3,
        recorded.sha256,
        recorded.size_bytes,
    ):
        raise IntegrityError(
            f"{target}: {kind} does not match its manifest: built {recorded.blake3} "
            f"({recorded.size_bytes} bytes), found {actual.blake3} "
            f"({actual.size_bytes} bytes); refusing to use it"
        )
    return actual


def _tensor(raw: dict[str, Any]) -> TensorInfo:
    def dims(key: str) -> tuple[int, ...] | None:
        value = raw.get(key)
        return None if value is None else tuple(value)

    return TensorInfo(
        name=raw["name"],
        datatype=raw["datatype"],
        shape=tuple(raw["shape"]),
        min=dims("min"),
        opt=dims("opt"),
        max=dims("max"),
        optional=raw.get("optional", False),
        sample_values=SampleValues.from_json(raw.get("sample_values")),
    )


def model_info_from_dict(model: dict[str, Any]) -> ModelInfo:
    """Rebuild a :class:`ModelInfo` from its ``asdict`` / JSON form.

    Raises:
        KeyError, TypeError, ValueError: a field is missing or of the wrong kind.
    """
    return ModelInfo(
        name=model["name"],
        version=model["version"],
        backend=model["backend"],
        precision=model["precision"],
        max_batch_size=model["max_batch_size"],
        inputs=tuple(_tensor(t) for t in model["inputs"]),
        outputs=tuple(_tensor(t) for t in model["outputs"]),
    )


def manifest_from_dict(raw: dict[str, Any]) -> Manifest:
    """Rebuild a :class:`Manifest` from its JSON form (no digest check).

    Raises:
        KeyError, TypeError: a field is missing or of the wrong kind.
    """
    return Manifest(
        model=model_info_from_dict(raw["model"]),
        engine=FileRecord(**raw["engine"]),
        source=FileRecord(**raw["source"]),
        spec_digest=raw["spec_digest"],
        backend=raw["backend"],
        build=raw["build"],
        report=raw.get("report", {}),
        engine_data=tuple(FileRecord(**r) for r in raw["engine_data"]),
        schema_version=raw["schema_version"],
        manifest_digest=raw.get("manifest_digest", ""),
    )
