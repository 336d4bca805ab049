"""``mmaas export triton MODEL -o REPOSITORY``: the verified engine of a built image as one
model of a Triton model repository, in the form Triton loads.

Layout (Triton's "Model Repository" docs)::

    REPOSITORY/<name>/config.pbtxt        the ModelConfig (text protobuf)
    REPOSITORY/<name>/1/model.onnx        the graph (:mod:`mmaas.export.triton_graph`:
    REPOSITORY/<name>/1/<data files>      the CPU engine, or the source ONNX for a GPU;
                                          model.plan for TensorRT), its external data beside

The config is Triton's own ``ModelConfig`` message (``model_config.proto``, the stubs
mmaas generates from tritonclient's descriptors at install time), built by the same
function that answers the server's ModelConfig RPC (:func:`mmaas.server.protocol.messages.
to_model_config`: dims without the batch axis when ``max_batch_size > 0``, ``-1`` for
dynamic dims, a scalar as ``dims: [1]`` + ``reshape: { shape: [] }``, BYTES as
``TYPE_STRING``), with ``instance_group`` (``runtime.instance_count``, CPU or GPU: the
shipped graph's device), ``dynamic_batching`` (preferred sizes, queue delay,
``default_queue_policy.max_queue_size``); then the back end's optimization settings (the
CPU engine: ``optimization.graph.level`` as it was optimized; the Triton onnxruntime
backend's -1 = basic, 1 = extended, unset = all) and the identity of what was shipped as
``parameters`` (``mmaas.*``: the engine's blake3 and sha256, the manifest digest, the
back end and its version, which graph and its sha256).

Triton's batching rule (its ONNX Runtime and TensorRT back ends): with ``max_batch_size >
0`` axis 0 of every input and output must be dynamic (the batch) and ``dims`` leave it
out. A model whose axis 0 is fixed somewhere (an export traced at batch 1) is written
with ``max_batch_size: 0`` and full shapes, and the export says so (requests carry the
batch of 1 in their shape). Other models in the repository are left alone; this model's
folder is replaced whole (:mod:`mmaas.export.output`).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from google.protobuf import text_format

from mmaas.backends import get_runtime, get_target
from mmaas.build import docker as docker_engine
from mmaas.build.plan import MODEL_DIR
from mmaas.core.errors import UsageError
from mmaas.core.hashing import file_digests
from mmaas.core.model_dir import verify_model_dir
from mmaas.export.output import write_folder
from mmaas.export.source import ExportSource, Say, export_source
from mmaas.export.triton_graph import check_source, outputs_to_declare, redeclare_outputs
from mmaas.server.metrics import ModelMetrics
from mmaas.server.protocol.messages import to_model_config
from mmaas.server.repository import ConfigFacts, ServedModel
from mmaas.spec.onnx_graph import external_data_files

ENGINE_FILES = {"onnxruntime": "model.onnx", "tensorrt": "model.plan"}
ORT_GRAPH_LEVELS = {"basic": -1, "extended": 1, "all": 0}  # Triton's optimization.graph.level
Device = Literal["cpu", "gpu"]


@dataclass(frozen=True)
class TritonExport:
    """What was written: the model's folder in the repository, the Triton version folder
    and the config text."""

    model_dir: Path
    version: int
    config: str


def default_device(source: ExportSource) -> Device:
    """Where the model's back end serves: ``gpu`` for TensorRT and ONNX Runtime with
    ``build.onnxruntime.device: gpu``, else ``cpu``."""
    spec = source.spec
    on_gpu = get_target(spec.backend).runs_on_gpu or (
        spec.backend == "onnxruntime" and spec.build.onnxruntime.device == "gpu"
    )
    return "gpu" if on_gpu else "cpu"


def export_triton(
    model: Path,
    repository: Path,
    *,
    image: str | None,
    version: int,
    say: Say,
    device: Device | None = None,
) -> TritonExport:
    """Write ``model``'s verified graph and its ``config.pbtxt`` into the Triton model
    repository ``repository`` as ``<name>/<version>/``, for Triton instances on ``device``
    (default :func:`default_device`).

    Raises:
        SpecError, UsageError, IntegrityError, DockerError: see
            :func:`mmaas.export.source.export_source`; UsageError also when the model's
            folder in the repository holds files mmaas did not export, or for a CPU
            export of a TensorRT engine; IntegrityError also when a GPU export's source
            ONNX is not the one the image was built from.
    """
    source = export_source(model, image, say)
    with tempfile.TemporaryDirectory(prefix="mmaas-triton-") as scratch:
        engine_dir = docker_engine.copy_from_image(
            source.local_image, MODEL_DIR, Path(scratch) / "m"
        )
        return write_triton(source, engine_dir, repository, version, say, device)


def write_triton(
    source: ExportSource,
    engine_dir: Path,
    repository: Path,
    version: int,
    say: Say,
    device: Device | None = None,
) -> TritonExport:
    """Write the model whose verified model directory (from its image) is ``engine_dir``
    into ``repository`` (see :func:`export_triton`).

    Raises:
        UsageError, IntegrityError: see :func:`export_triton`.
    """
    device = device or default_device(source)
    if device == "cpu" and source.spec.backend == "tensorrt":
        raise UsageError("a TensorRT engine runs on a GPU only", hint="export with --device gpu")
    checked = verify_model_dir(engine_dir)  # one engine, at the top (see export_source)
    manifest = checked.engines[0].manifest
    graph, folder = engine_dir / manifest.engine.path, engine_dir
    data = [f.path for f in manifest.engine_data]
    if device == "gpu" and source.spec.backend == "onnxruntime":
        check_source(source.onnx, manifest.source)
        graph, folder = source.onnx, source.onnx.parent
        data = list(external_data_files(source.onnx))
    with tempfile.TemporaryDirectory(prefix="mmaas-triton-") as scratch:
        if source.spec.backend == "onnxruntime":
            served = {t.name: t.shape for t in manifest.model.outputs}
            redeclared = outputs_to_declare(graph, served)
            if redeclared:
                redeclare_outputs(graph, Path(scratch) / "model.onnx", redeclared)
                say(f"the graph's outputs declared as served: {redeclared}")
                graph = Path(scratch) / "model.onnx"
        config = model_config(source, version, device, say, graph)
        text = text_format.MessageToString(config)
        files: dict[str, str | Path] = {"config.pbtxt": text}
        files[f"{version}/{ENGINE_FILES[source.spec.backend]}"] = graph
        for name in data:
            files[f"{version}/{name}"] = folder / name
        record = {
            "kind": "triton",
            "model": source.spec.name,
            "version": source.spec.version,
            "image": source.reference,
            "manifest_digest": checked.manifest_digest,
        }
        target = repository / source.spec.name
        write_folder(target, files, record)
    return TritonExport(target, version, text)


def model_config(
    source: ExportSource,
    version: int = 1,
    device: Device | None = None,
    say: Say | None = None,
    graph: Path | None = None,
) -> Any:
    """The ``inference.ModelConfig`` of ``source``'s engine served as Triton version
    ``version`` (its ``version_policy``) on ``device``; ``graph``: the shipped file, whose
    sha256 goes into the parameters; ``say`` hears why batching was turned off (see the
    module doc)."""
    spec, manifest = source.spec, source.manifest
    device = device or default_device(source)
    info = manifest.model
    fixed = [t.name for t in (*info.inputs, *info.outputs) if not t.shape or t.shape[0] != -1]
    if info.max_batch_size > 0 and fixed:
        info = replace(info, max_batch_size=0)
        if say:
            say(
                f"axis 0 of {', '.join(map(repr, fixed))} is fixed in the ONNX model: Triton "
                "batches only when axis 0 of every input and output is dynamic, so "
                "config.pbtxt has max_batch_size 0 and full shapes (a request's shape "
                "carries its batch of 1)"
            )
    batching = spec.runtime.dynamic_batching
    facts = ConfigFacts(
        platform=get_runtime(spec.backend).platform,
        device_kind=device.upper(),
        instance_count=spec.runtime.instance_count,
        batching=batching is not None and info.max_batch_size > 0,
        preferred_batch_sizes=tuple(batching.preferred_batch_size) if batching else (),
        max_queue_delay_us=batching.max_queue_delay_microseconds if batching else 0,
    )
    served = ServedModel(info, 0, ModelMetrics(info.name, info.version), facts, number=version)
    config = to_model_config(served)
    config.default_model_filename = ENGINE_FILES[spec.backend]
    if facts.batching and batching is not None:
        config.dynamic_batching.default_queue_policy.max_queue_size = batching.max_queue_size
    shipped = "engine"
    if spec.backend == "onnxruntime" and device == "gpu":
        shipped = "source"  # provider-neutral: Triton's ONNX Runtime optimizes it at load
    elif spec.backend == "onnxruntime":
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
        "mmaas.graph": shipped,
    }
    if graph is not None:
        parameters["mmaas.graph.sha256"] = file_digests(graph)["sha256"]
    if manifest.engine_data:
        parameters["mmaas.engine_data.blake3"] = ",".join(f.blake3 for f in manifest.engine_data)
    for key, value in parameters.items():
        config.parameters[key].string_value = value
    return config
