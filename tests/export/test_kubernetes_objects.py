"""The exported Kubernetes objects, checked against the Kubernetes 1.37 OpenAPI schemas
(PyPI kubernetes-validate, offline, strict: unknown fields fail) and against the server
they describe: every port it listens on, probes on the routed port, a grace period that
fits its drain, the restricted security context (C32)."""

from __future__ import annotations

import copy
from pathlib import Path

import kubernetes_validate
import pytest

from export_models import ENGINE_BYTES, model_copy, source_of
from mmaas.export import pod
from mmaas.export.kserve import kserve_objects
from mmaas.export.plain import plain_objects

K8S = "1.37.0"
SETTINGS = {
    "runtime": {"instance_count": 2, "http_port": 8000, "grpc_port": 9001, "metrics_port": 9002},
    "deploy": {
        "resources": {"cpu": "3"},
        "min_replicas": 2,
        "max_replicas": 5,
        "pre_stop_seconds": 7,
    },
}


@pytest.fixture
def source(tmp_path: Path, ppocr_models: dict[str, Path]):
    return source_of(model_copy(tmp_path, ppocr_models["ppocr-det"], SETTINGS))


def validate(document: dict) -> None:
    kubernetes_validate.validate(document, K8S, strict=True)


def as_pod(spec: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


def test_plain_objects_validate_against_kubernetes(source) -> None:
    for name, document in plain_objects(source, None).items():
        validate(document), name


def test_the_schema_check_can_fail(source) -> None:
    broken = copy.deepcopy(plain_objects(source, None)["deployment.yaml"])
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["grpcc"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(broken)


def test_kserve_pod_parts_validate_as_kubernetes_pods(source) -> None:
    """KServe embeds core/v1 types: the runtime's containers and volumes, and the
    predictor's PodSpec fields, are checked as a Pod (the KServe-only fields left out)."""
    for mode in ("raw", "serverless"):
        for protocol in ("grpc-v2", "v2"):
            objects = kserve_objects(source, mode, protocol, None)
            runtime = objects["servingruntime.yaml"]["spec"]
            validate(as_pod({"containers": runtime["containers"], "volumes": runtime["volumes"]}))
            predictor = dict(objects["inferenceservice.yaml"]["spec"]["predictor"])
            model = predictor.pop("model")
            for key in ("minReplicas", "maxReplicas", "scaleMetric", "scaleTarget"):
                predictor.pop(key)
            container = {"name": "kserve-container", "resources": model["resources"]}
            validate(as_pod({**predictor, "containers": [container]}))


def test_every_server_port_is_named_and_probes_target_the_routed_one(source) -> None:
    """Raw mode and plain objects expose gRPC (first: KServe routes it), HTTP and
    metrics; serverless exposes only the routed port, named for Knative (C32)."""
    raw = kserve_objects(source, "raw", "grpc-v2", None)["servingruntime.yaml"]
    container = raw["spec"]["containers"][0]
    assert [(p["name"], p["containerPort"]) for p in container["ports"]] == [
        ("grpc", 9001),
        ("http", 8000),
        ("http-metrics", 9002),
    ]
    assert container["readinessProbe"]["grpc"] == {"port": 9001}
    assert container["startupProbe"]["grpc"] == {"port": 9001}
    assert container["livenessProbe"]["grpc"] == {"port": 9001, "service": "liveness"}
    rest = kserve_objects(source, "serverless", "v2", None)["servingruntime.yaml"]
    container = rest["spec"]["containers"][0]
    assert container["ports"] == [{"name": "http1", "containerPort": 8000, "protocol": "TCP"}]
    assert container["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": 8000}
    assert container["startupProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": 8000}
    assert "lifecycle" not in container  # Knative's queue-proxy drains
    grpc = kserve_objects(source, "serverless", "grpc-v2", None)["servingruntime.yaml"]
    container = grpc["spec"]["containers"][0]
    assert container["ports"] == [{"name": "h2c", "containerPort": 9001, "protocol": "TCP"}]
    assert container["livenessProbe"]["grpc"] == {"port": 9001, "service": "liveness"}
    service = plain_objects(source, None)["service.yaml"]["spec"]["ports"]
    assert {(p["port"], p["appProtocol"]) for p in service} == {
        (9001, "kubernetes.io/h2c"),
        (8000, "http"),
        (9002, "http"),
    }


def test_grace_period_covers_pre_stop_and_the_servers_drain(source) -> None:
    """terminationGracePeriodSeconds = preStop 7 + runtime.shutdown_grace_seconds (25 by
    default: the server's drain after SIGTERM) + the margin; preStop is Kubernetes' sleep
    action."""
    deployment = plain_objects(source, None)["deployment.yaml"]["spec"]["template"]["spec"]
    assert deployment["terminationGracePeriodSeconds"] == 7 + 25 + pod.KILL_MARGIN_S
    assert deployment["containers"][0]["lifecycle"] == {"preStop": {"sleep": {"seconds": 7}}}
    isvc = kserve_objects(source, "raw", "grpc-v2", None)["inferenceservice.yaml"]
    assert isvc["spec"]["predictor"]["terminationGracePeriodSeconds"] == 37


def test_restricted_security_context_and_resources(source) -> None:
    container = plain_objects(source, None)["deployment.yaml"]["spec"]["template"]["spec"][
        "containers"
    ][0]
    security = container["securityContext"]
    assert security["runAsNonRoot"] and security["readOnlyRootFilesystem"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert container["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    # memory: 512 MiB + 2 x 96 MiB x 2 instances = 896 MiB -> 1024Mi (256 MiB steps)
    assert ENGINE_BYTES == 96 * 2**20
    assert container["resources"]["requests"] == {"cpu": "3", "memory": "1024Mi"}
    assert container["resources"]["limits"] == {"memory": "1024Mi"}
    env = {item["name"]: item["value"] for item in container["env"]}
    assert env["MMAAS_THREADS"] == "1"  # 3 cores over 2 instances
    assert env["MMAAS_EXPECTED_ENGINE"] == source.manifest.engine.blake3
    assert env["MMAAS_GRPC_PORT"] == "9001" and env["MMAAS_HTTP_PORT"] == "8000"


def test_gpu_back_end_requests_nvidia_gpus(tmp_path: Path, ppocr_models: dict[str, Path]) -> None:
    settings = {**SETTINGS, "backend": "tensorrt", "target_precision": "fp16"}
    source = source_of(model_copy(tmp_path, ppocr_models["ppocr-det"], settings))
    resources = pod.resources(source)
    assert resources["limits"][pod.GPU_RESOURCE] == "1"
    assert resources["requests"][pod.GPU_RESOURCE] == "1"
