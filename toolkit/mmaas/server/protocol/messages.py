"""A served model described in KServe v2 / Triton messages: ModelMetadata, Triton's
ModelConfig (``model_config.proto``) and ModelStatistics, built from its signature
(``ServedModel.info``), its config facts and
:class:`~mmaas.server.metrics.ModelMetrics` snapshots. Both front ends answer these
messages: gRPC as they are, HTTP printed as JSON (:mod:`mmaas.server.http.protojson`), and
the Triton export writes the config (:mod:`mmaas.export.triton`).

Triton conventions kept: ``platform`` is the back end's (its runtime part says:
``onnxruntime_onnx``, ``tensorrt_plan``), the instance group kind (CPU, GPU, with its
``gpus``) is where the loaded instances run; ModelConfig ``dims`` leave out the batch axis
when ``max_batch_size > 0``; BYTES is ``TYPE_STRING``; statistics durations are cumulative
nanoseconds. Scalars as Triton declares them (``model_configuration.md``, "Reshape"; its
ONNX Runtime back end takes no empty ``dims``): a tensor with no dims besides the batch
axis (a rank-0 one without batching) is advertised with one dim of 1, ModelConfig ``dims:
[1]`` and ``reshape { shape: [] }``, metadata ``[1]`` (``[-1, 1]`` batched):
:func:`advertised_shape` is that rule, which the request path (a request may send either
shape) and the Triton export share. An input's ``sample_values`` travel in ModelConfig
``parameters`` (:data:`~mmaas.core.sample_values.CONFIG_PARAMETER`: JSON by input name)
for load tools (``mmaas bench``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import mmaas
from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.core.sample_values import CONFIG_PARAMETER
from mmaas.server.protocol.stubs import grpc_service_pb2 as service_pb2
from mmaas.server.protocol.stubs import model_config_pb2
from mmaas.server.repository import ServedModel

# Triton's names of the extensions this server honours, the same list over gRPC
# (ServerMetadata) and HTTP (GET /v2), as Triton answers both; CUDA shared memory and
# tracing are answered (refused or empty) but not listed.
EXTENSIONS = (
    "model_repository",
    "model_configuration",
    "system_shared_memory",
    "binary_tensor_data",
    "statistics",
    "logging",
    "generate",
)


def advertised_shape(shape: Sequence[int], batched: bool) -> tuple[int, ...]:
    """The shape a tensor of declared ``shape`` is advertised with (metadata; ModelConfig
    dims after the batch axis): with no dims besides the batch axis (``batched``: axis 0
    is it), one dim of 1 is added, Triton's convention for scalars (ModelConfig ``dims:
    [1]`` with ``reshape { shape: [] }``); any other shape as declared."""
    batch, dims = (tuple(shape[:1]), tuple(shape[1:])) if batched else ((), tuple(shape))
    return (*batch, *(dims or (1,)))


def to_server_metadata() -> Any:
    """ServerMetadataResponse: name ``mmaas``, its version and :data:`EXTENSIONS`."""
    return service_pb2.ServerMetadataResponse(
        name="mmaas", version=mmaas.__version__, extensions=list(EXTENSIONS)
    )


def to_metadata(model: ServedModel) -> Any:
    """ModelMetadataResponse: full shapes with ``-1`` for dynamic dims, batch included,
    scalars as :func:`advertised_shape` says;
    ``versions``: the version the model reports, Triton's number (``["1"]``; the spec's
    version string is accepted in requests but, as in Triton, not listed)."""
    info, facts = model.info, model.config
    batched = info.max_batch_size > 0

    def tensor(t: TensorInfo) -> Any:
        return service_pb2.ModelMetadataResponse.TensorMetadata(
            name=t.name, datatype=t.datatype, shape=list(advertised_shape(t.shape, batched))
        )

    return service_pb2.ModelMetadataResponse(
        name=info.name,
        versions=[model.version],
        platform=facts.platform,
        inputs=[tensor(t) for t in info.inputs],
        outputs=[tensor(t) for t in info.outputs],
    )


def to_model_config(model: ServedModel) -> Any:
    """Triton ModelConfig of the served model (what ``get_model_config`` shows): scalars
    as :func:`advertised_shape` says, with ``reshape``; the inputs' sample values in
    ``parameters`` (:data:`~mmaas.core.sample_values.CONFIG_PARAMETER`); its version
    policy serves exactly its version number; ``model_transaction_policy.decoupled`` is
    set for a model that answers with many responses."""
    info, facts = model.info, model.config
    skip = 1 if info.max_batch_size > 0 else 0

    def data_type(t: TensorInfo) -> Any:  # a model_config_pb2.DataType value
        name = "TYPE_STRING" if t.datatype == "BYTES" else f"TYPE_{t.datatype}"
        return model_config_pb2.DataType.Value(name)

    def shape(t: TensorInfo) -> dict[str, Any]:  # dims, and the reshape of a scalar
        dims = list(advertised_shape(t.shape, skip == 1)[skip:])
        if len(t.shape) == skip:  # the engine takes it without the dim of 1
            return {"dims": dims, "reshape": model_config_pb2.ModelTensorReshape(shape=[])}
        return {"dims": dims}

    config = model_config_pb2.ModelConfig(
        name=info.name,
        platform=facts.platform,
        backend=info.backend,
        max_batch_size=info.max_batch_size,
        input=[
            model_config_pb2.ModelInput(
                name=t.name, data_type=data_type(t), optional=t.optional, **shape(t)
            )
            for t in info.inputs
        ],
        output=[
            model_config_pb2.ModelOutput(name=t.name, data_type=data_type(t), **shape(t))
            for t in info.outputs
        ],
        instance_group=[
            model_config_pb2.ModelInstanceGroup(
                count=facts.instance_count,
                kind=model_config_pb2.ModelInstanceGroup.Kind.Value(f"KIND_{facts.device_kind}"),
                gpus=list(facts.gpus),
            )
        ],
    )
    samples = {t.name: t.sample_values.to_json() for t in info.inputs if t.sample_values}
    if samples:
        config.parameters[CONFIG_PARAMETER].string_value = json.dumps(samples, sort_keys=True)
    config.version_policy.specific.versions.append(model.number)
    config.model_transaction_policy.decoupled = facts.decoupled
    if facts.batching:
        config.dynamic_batching.preferred_batch_size.extend(facts.preferred_batch_sizes)
        config.dynamic_batching.max_queue_delay_microseconds = facts.max_queue_delay_us
    return config


def to_statistics(models: Sequence[ServedModel]) -> Any:
    """ModelStatisticsResponse of ``models``, in that order, each under the version it
    reports (Triton's number: perf_analyzer keys statistics by it). Compute counts are
    requests, as the durations are summed per request (Triton's: per-request averages)."""
    return service_pb2.ModelStatisticsResponse(
        model_stats=[_model_statistics(m.info, m.version, m.metrics.snapshot()) for m in models]
    )


def _model_statistics(info: ModelInfo, version: str, snapshot: dict[str, Any]) -> Any:
    durations = snapshot["duration_ns"]
    executions = snapshot["execution_count"]
    served = snapshot["success"]

    def stat(count: int, ns: int) -> Any:
        return service_pb2.StatisticDuration(count=count, ns=ns)

    inference = service_pb2.InferStatistics(
        success=stat(snapshot["success"], durations.get("request", 0)),
        fail=stat(sum(snapshot["failures"].values()), 0),
        queue=stat(snapshot["success"], durations.get("queue", 0)),
        compute_input=stat(served, durations.get("compute_input", 0)),
        compute_infer=stat(served, durations.get("compute_infer", 0)),
        compute_output=stat(served, durations.get("compute_output", 0)),
    )
    batches = [
        service_pb2.InferBatchStatistics(
            batch_size=size,
            compute_input=stat(count, input_ns),
            compute_infer=stat(count, infer_ns),
            compute_output=stat(count, output_ns),
        )
        for size, (count, input_ns, infer_ns, output_ns) in sorted(snapshot["batches"].items())
    ]
    return service_pb2.ModelStatistics(
        name=info.name,
        version=version,
        last_inference=snapshot["last_inference_ms"],
        inference_count=snapshot["inference_count"],
        execution_count=executions,
        inference_stats=inference,
        batch_stats=batches,
    )
