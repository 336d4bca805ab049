"""The served model described in KServe v2 / Triton messages: ModelMetadata, Triton's
ModelConfig (``model_config.proto``) and ModelStatistics, built from ``manifest.model``,
the runtime settings and :class:`~mmaas.server.metrics.ModelMetrics` snapshots.

Triton conventions kept: ``platform`` is the back end's (its runtime part says:
``onnxruntime_onnx``, ``tensorrt_plan``), so is the instance group kind (CPU, GPU);
ModelConfig ``dims`` leave out the batch axis when ``max_batch_size > 0``; BYTES is
``TYPE_STRING``; statistics durations are cumulative nanoseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.server.grpc.protocol import grpc_service_pb2 as service_pb2
from mmaas.server.grpc.protocol import model_config_pb2


@dataclass(frozen=True)
class ConfigFacts:
    """Runtime facts the model's metadata and config report: Triton's ``platform`` and
    instance kind (``CPU``/``GPU``) of the back end, engine instances and dynamic batching
    (``preferred_batch_sizes`` and ``max_queue_delay_us`` only when ``batching``)."""

    platform: str
    device_kind: str
    instance_count: int
    batching: bool
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_delay_us: int = 0


def to_metadata(info: ModelInfo, facts: ConfigFacts) -> Any:
    """ModelMetadataResponse: full shapes with ``-1`` for dynamic dims, batch included."""

    def tensor(t: TensorInfo) -> Any:
        return service_pb2.ModelMetadataResponse.TensorMetadata(
            name=t.name, datatype=t.datatype, shape=list(t.shape)
        )

    return service_pb2.ModelMetadataResponse(
        name=info.name,
        versions=[info.version],
        platform=facts.platform,
        inputs=[tensor(t) for t in info.inputs],
        outputs=[tensor(t) for t in info.outputs],
    )


def to_model_config(info: ModelInfo, facts: ConfigFacts) -> Any:
    """Triton ModelConfig of the served model (what ``get_model_config`` shows)."""
    skip = 1 if info.max_batch_size > 0 else 0

    def tensor(kind: Any, t: TensorInfo) -> Any:  # kind: ModelInput or ModelOutput
        name = "TYPE_STRING" if t.datatype == "BYTES" else f"TYPE_{t.datatype}"
        data_type = int(model_config_pb2.DataType.Value(name))
        return kind(name=t.name, data_type=data_type, dims=list(t.shape[skip:]))

    config = model_config_pb2.ModelConfig(
        name=info.name,
        platform=facts.platform,
        backend=info.backend,
        max_batch_size=info.max_batch_size,
        input=[tensor(model_config_pb2.ModelInput, t) for t in info.inputs],
        output=[tensor(model_config_pb2.ModelOutput, t) for t in info.outputs],
        instance_group=[
            model_config_pb2.ModelInstanceGroup(
                count=facts.instance_count,
                kind=model_config_pb2.ModelInstanceGroup.Kind.Value(f"KIND_{facts.device_kind}"),
            )
        ],
    )
    if facts.batching:
        config.dynamic_batching.preferred_batch_size.extend(facts.preferred_batch_sizes)
        config.dynamic_batching.max_queue_delay_microseconds = facts.max_queue_delay_us
    return config


def to_statistics(info: ModelInfo, snapshot: dict[str, Any]) -> Any:
    """ModelStatisticsResponse from a :meth:`ModelMetrics.snapshot`."""
    durations = snapshot["duration_ns"]
    executions = snapshot["execution_count"]

    def stat(count: int, ns: int) -> Any:
        return service_pb2.StatisticDuration(count=count, ns=ns)

    inference = service_pb2.InferStatistics(
        success=stat(snapshot["success"], durations.get("request", 0)),
        fail=stat(sum(snapshot["failures"].values()), 0),
        queue=stat(snapshot["success"], durations.get("queue", 0)),
        compute_input=stat(executions, durations.get("compute_input", 0)),
        compute_infer=stat(executions, durations.get("compute_infer", 0)),
        compute_output=stat(executions, durations.get("compute_output", 0)),
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
    model = service_pb2.ModelStatistics(
        name=info.name,
        version=info.version,
        last_inference=snapshot["last_inference_ms"],
        inference_count=snapshot["inference_count"],
        execution_count=executions,
        inference_stats=inference,
        batch_stats=batches,
    )
    return service_pb2.ModelStatisticsResponse(model_stats=[model])
