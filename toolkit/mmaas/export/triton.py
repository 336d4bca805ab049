"""``mmaas export triton MODEL -o REPOSITORY``: the verified engine of a built image as one
model of a Triton model repository.

Layout (Triton's "Model Repository" docs)::

    REPOSITORY/<name>/config.pbtxt        the ModelConfig (text protobuf)
    REPOSITORY/<name>/1/model.onnx        ONNX Runtime's optimized engine (model.plan for
    REPOSITORY/<name>/1/<engine data>     TensorRT), its external data files beside it

The config is Triton's own ``ModelConfig`` message (``model_config.proto``, the stubs
mmaas generates from tritonclient's descriptors at install time), built by the same
function that answers the server's ModelConfig RPC (:func:`mmaas.server.protocol.messages.
to_model_config`): ``platform`` (``onnxruntime_onnx`` / ``tensorrt_plan``),
``max_batch_size``, inputs and outputs with dims from the manifest (the batch axis left
out when ``max_batch_size > 0``, ``-1`` for dynamic dims, BYTES as ``TYPE_STRING``),
``instance_group`` (``runtime.instance_count``, CPU or GPU), ``dynamic_batching``
(preferred sizes, queue delay, ``default_queue_policy.max_queue_size``); then the back
end's optimization settings (ONNX Runtime: ``optimization.graph.level`` as the engine was
optimized; the Triton onnxruntime backend's -1 = basic, 1 = extended, unset = all) and the
engine's identity as ``parameters`` (``mmaas.*``: its blake3 and sha256, the manifest
digest, the back end and its version: Triton's ONNX Runtime or TensorRT must be that
version or, for ONNX Runtime, newer). Other models in the repository are left alone;
this model's folder is replaced whole (:mod:`mmaas.export.output`).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import text_format

from mmaas.backends import get_runtime
from mmaas.build import docker as docker_engine
from mmaas.build.plan import MODEL_DIR
from mmaas.core.model_dir import verify_model_dir
from mmaas.export.output import write_folder
from mmaas.export.source import ExportSource, Say, export_source
from mmaas.server.metrics import ModelMetrics
from mmaas.server.protocol.messages import to_model_config
from mmaas.server.repository import ConfigFacts, ServedModel

ENGINE_FILES = {"onnxruntime": "model.onnx", "tensorrt": "model.plan"}
ORT_GRAPH_LEVELS = {"basic": -1, "extended": 1, "all": 0}  # Triton's optimization.graph.level


@dataclass(frozen=True)
class TritonExport:
    """What was written: the model's folder in the repository, the Triton version folder
    and the config text."""

    model_dir: Path
    version: int
    config: str


def export_triton(
    model: Path, repository: Path, *, image: str | None, version: int, say: Say
) -> TritonExport:
    """Write ``model``'s verified engine and its ``config.pbtxt`` into the Triton model
    repository ``repository`` as ``<name>/<version>/``.

    Raises:
        SpecError, UsageError, IntegrityError, DockerError: see
            :func:`mmaas.export.source.export_source`; UsageError also when the model's
            folder in the repository holds files mmaas did not export.
    """
    source = export_source(model, image, say)
    config = text_format.MessageToString(model_config(source, version))
    target = repository / source.spec.name
    with tempfile.TemporaryDirectory(prefix="mmaas-triton-") as scratch:
        engine_dir = docker_engine.copy_from_image(
            source.local_image, MODEL_DIR, Path(scratch) / "m"
        )
        checked = verify_model_dir(engine_dir)  # one engine, at the top (see export_source)
        manifest = checked.engines[0].manifest
        files: dict[str, str | Path] = {"config.pbtxt": config}
        files[f"{version}/{ENGINE_FILES[source.spec.backend]}"] = engine_dir / manifest.engine.path
        for data in manifest.engine_data:
            files[f"{version}/{data.path}"] = engine_dir / data.path
        record = {
            "kind": "triton",
            "model": source.spec.name,
            "version": source.spec.version,
            "image": source.reference,
            "manifest_digest": checked.manifest_digest,
        }
        write_folder(target, files, record)
    return TritonExport(target, version, config)


def model_config(source: ExportSource, version: int = 1) -> Any:
    """The ``inference.ModelConfig`` of ``source``'s engine served as Triton version
    ``version`` (its ``version_policy``; see the module doc)."""
    spec, manifest = source.spec, source.manifest
    runtime = get_runtime(spec.backend)
    batching = spec.runtime.dynamic_batching
    facts = ConfigFacts(
        platform=runtime.platform,
        device_kind=runtime.device_kind,
        instance_count=spec.runtime.instance_count,
        batching=batching is not None and spec.max_batch_size > 0,
        preferred_batch_sizes=tuple(batching.preferred_batch_size) if batching else (),
        max_queue_delay_us=batching.max_queue_delay_microseconds if batching else 0,
    )
    info = manifest.model
    served = ServedModel(info, 0, ModelMetrics(info.name, info.version), facts, number=version)
    config = to_model_config(served)
    config.default_model_filename = ENGINE_FILES[spec.backend]
    if facts.batching and batching is not None:
        config.dynamic_batching.default_queue_policy.max_queue_size = batching.max_queue_size
    if spec.backend == "onnxruntime":
        level = ORT_GRAPH_LEVELS[spec.build.onnxruntime.graph_optimization_level]
        if level:
            config.optimization.graph.level = level
    parameters = {
        "mmaas.engine.blake3": manifest.engine.blake3,
        "mmaas.engine.sha256": manifest.engine.sha256,
        "mmaas.manifest.digest": source.model_manifest.manifest_digest,
        "mmaas.model.version": spec.version,
        "mmaas.backend": str(manifest.backend.get("name", spec.backend)),
        "mmaas.backend.version": str(manifest.backend.get("version", "")),
        "mmaas.image": source.reference,
    }
    if manifest.engine_data:
        parameters["mmaas.engine_data.blake3"] = ",".join(f.blake3 for f in manifest.engine_data)
    for key, value in parameters.items():
        config.parameters[key].string_value = value
    return config
