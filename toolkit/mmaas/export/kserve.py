"""KServe objects: a ``ServingRuntime`` (``serving.kserve.io/v1alpha1``) whose one container
is the mmaas image, and an ``InferenceService`` (``serving.kserve.io/v1beta1``) using it.

The model is inside the image, so the predictor has no ``storageUri`` (KServe then adds no
storage initializer) and names its runtime explicitly; the model format ``mmaas-<name>``
is one only this runtime supports (``autoSelect: false``). Deployment modes (C32):

* ``raw`` (``serving.kserve.io/deploymentMode: RawDeployment``): KServe makes a
  Deployment, a Service whose port 80 reaches the container's first port (the protocol's:
  gRPC for ``grpc-v2``, REST for ``v2``) and one Service port per further container port,
  and an HPA from ``minReplicas``/``maxReplicas``/``scaleMetric: cpu``/``scaleTarget``.
* ``serverless`` (Knative): Knative routes exactly one container port, named ``h2c`` for
  gRPC (HTTP/2 cleartext) or ``http1`` for REST; the metrics port is still scraped through
  the pod annotations (Prometheus reaches pod ports directly), probes target the routed
  port, and the drain is Knative's (its queue-proxy), so no preStop; the startup probe
  stays (Knative Serving takes one since 1.15 and leaves it to the kubelet).

Pod-level settings (grace period, security context) sit in the predictor, which embeds a
PodSpec; the container's (probes, security context, preStop, ``/tmp``) in the runtime;
resources in the predictor's model container, which KServe merges over the runtime's.
"""

from __future__ import annotations

from typing import Any, Literal

from mmaas.build.runtime_env import served_ports
from mmaas.export import pod
from mmaas.export.source import ExportSource

Mode = Literal["raw", "serverless"]
Protocol = Literal["grpc-v2", "v2"]  # KServe's protocolVersion names
ROUTED = {"grpc-v2": "grpc", "v2": "http"}  # the served_ports role each protocol routes
KNATIVE_PORT_NAMES = {"grpc": "h2c", "http": "http1"}
CONTAINER = "kserve-container"  # the container name KServe merges the predictor into
MODES = {"raw": "RawDeployment", "serverless": "Serverless"}


def kserve_objects(
    source: ExportSource, mode: Mode, protocol: Protocol, trusted_keys: str | None
) -> dict[str, dict[str, Any]]:
    """``{"servingruntime.yaml": ServingRuntime, "inferenceservice.yaml":
    InferenceService}`` for ``source``, routing ``protocol``."""
    return {
        "servingruntime.yaml": serving_runtime(source, mode, protocol, trusted_keys),
        "inferenceservice.yaml": inference_service(source, mode, protocol),
    }


def model_format(source: ExportSource) -> str:
    """The model format only the exported runtime supports: ``mmaas-<name>``."""
    return pod.resource_name(source, "mmaas-")


def serving_runtime(
    source: ExportSource, mode: Mode, protocol: Protocol, trusted_keys: str | None
) -> dict[str, Any]:
    """The ServingRuntime: protocol versions v2 and grpc-v2 (those the image serves), the
    image's ports (only the routed one, named for Knative, when serverless), env from the
    spec's runtime settings, probes, security context, Prometheus annotations for the
    pods."""
    serverless = mode == "serverless"
    routed = ROUTED[protocol]
    container = pod.container(source, CONTAINER, trusted_keys, routed, serverless)
    if serverless:
        container["ports"][0]["name"] = KNATIVE_PORT_NAMES[routed]
    port = pod.prometheus_annotations(source).get("prometheus.io/port")
    annotations = {**pod.prometheus_annotations(source)}
    if port:
        annotations |= {"prometheus.kserve.io/port": port, "prometheus.kserve.io/path": "/metrics"}
    spec: dict[str, Any] = {
        "supportedModelFormats": [
            {"name": model_format(source), "version": "1", "autoSelect": False}
        ],
        "protocolVersions": [
            name for name, role in ROUTED.items() if role in served_ports(source.spec)
        ],
        "multiModel": False,
        "containers": [container],
        "volumes": [pod.TMP_VOLUME],
    }
    if annotations:
        spec["annotations"] = annotations
    return {
        "apiVersion": "serving.kserve.io/v1alpha1",
        "kind": "ServingRuntime",
        "metadata": {"name": pod.resource_name(source, "mmaas-"), "labels": pod.labels(source)},
        "spec": spec,
    }


def inference_service(source: ExportSource, mode: Mode, protocol: Protocol) -> dict[str, Any]:
    """The InferenceService: the predictor's model (format, runtime, ``protocol``,
    resources), replicas and CPU autoscaling, grace period and pod security."""
    deploy = source.spec.deploy
    annotations = {"serving.kserve.io/deploymentMode": MODES[mode]}
    if pod.prometheus_annotations(source):
        annotations["serving.kserve.io/enable-prometheus-scraping"] = "true"
    predictor: dict[str, Any] = {
        "minReplicas": deploy.min_replicas,
        "maxReplicas": deploy.max_replicas,
        "scaleMetric": "cpu",
        "scaleTarget": deploy.target_cpu_utilization,
        "securityContext": pod.pod_security(),
        "model": {
            "modelFormat": {"name": model_format(source), "version": "1"},
            "runtime": pod.resource_name(source, "mmaas-"),
            "protocolVersion": protocol,
            "resources": pod.resources(source),
        },
    }
    if mode == "raw":
        predictor["terminationGracePeriodSeconds"] = pod.grace_seconds(source)
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {
            "name": pod.resource_name(source),
            "labels": pod.labels(source),
            "annotations": annotations,
        },
        "spec": {"predictor": predictor},
    }
