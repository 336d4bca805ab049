"""A served model described in KServe v2 / Triton messages: ModelMetadata, Triton's
ModelConfig (``model_config.proto``) and ModelStatistics, built from its signature
(``ServedModel.info``), its config facts and
:class:`~mmaas.server.metrics.ModelMetrics` snapshots. Both front ends answer these
messages: gRPC as they are, HTTP printed as JSON (:mod:`mmaas.server.http.protojson`), and
the Triton export writes the config (:mod:`mmaas.export.triton`).

Triton conventions kept: ``platform`` is the back end's (its runtime part says:
``onnxruntime_onnx``, ``tensorrt_plan``), the instance group kind (CPU, GPU, with its
``gpus``) is where the loaded instances run; ModelConfig ``dims`` leave out the batch axis
when ``max_batch_size > 0``; a rank-0 tensor is ``dims: [1]`` with ``reshape: { shape: [] }``
(Triton's form for a scalar: its ONNX Runtime back end takes no empty ``dims``); BYTES is
``TYPE_STRING``; statistics durations are cumulative nanoseconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.server.protocol.stubs import grpc_service_pb2 as service_pb2
from mmaas.server.protocol.stubs import model_config_pb2
from mmaas.server.repository import ServedModel


def to_metadata(model: ServedModel) -> Any:
    """ModelMetadataResponse: full shapes with ``-1`` for dynamic dims, batch included;
    ``versions``: every version string the model answers to (Triton's number first)."""
    info, facts = model.info, model.config

    def tensor(t: TensorInfo) -> Any:
        return service_pb2.ModelMetadataResponse.TensorMetadata(
            name=t.name, datatype=t.datatype, shape=list(t.shape)
        )

    return service_pb2.ModelMetadataResponse(
        name=info.name,
        versions=list(model.versions),
        platform=facts.platform,
        inputs=[tensor(t) for t in info.inputs],
        outputs=[tensor(t) for t in info.outputs],
    )


def to_model_config(model: ServedModel) -> Any:
    """Triton ModelConfig of the served model (what ``get_model_config`` shows); its
    version policy serves exactly its version number; ``model_transaction_policy.decoupled``
    is set for a model that answers with many responses."""
    info, facts = model.info, model.config
    skip = 1 if info.max_batch_size > 0 else 0

    def data_type(t: TensorInfo) -> Any:  # a model_config_pb2.DataType value
        name = "TYPE_STRING" if t.datatype == "BYTES" else f"TYPE_{t.datatype}"
        return model_config_pb2.DataType.Value(name)

    def shape(t: TensorInfo) -> dict[str, Any]:  # dims, and the reshape of a scalar
        if not t.shape:
            return {"dims": [1], "reshape": model_config_pb2.ModelTensorReshape(shape=[])}
        return {"dims": list(t.shape[skip:])}

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
