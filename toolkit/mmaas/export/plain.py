"""Plain Kubernetes objects (no KServe): a Deployment (``apps/v1``), a Service
(``v1``), a HorizontalPodAutoscaler (``autoscaling/v2``) and a PodDisruptionBudget
(``policy/v1``), all labelled ``app.kubernetes.io/*`` and selecting the same pods.

Every port the server listens on is a Service port with its ``appProtocol``
(``kubernetes.io/h2c`` for gRPC, so Gateway API and mesh implementations speak HTTP/2
cleartext to it; ``http`` for REST and metrics) (C32); probes use the gRPC port. Rolling
updates never take a serving pod away before its replacement is ready
(``maxUnavailable: 0``).
"""

from __future__ import annotations

from typing import Any

from mmaas.export import pod
from mmaas.export.source import ExportSource

APP_PROTOCOLS = {"grpc": "kubernetes.io/h2c", "http": "http", "http-metrics": "http"}


def plain_objects(source: ExportSource, trusted_keys: str | None) -> dict[str, dict[str, Any]]:
    """``{"deployment.yaml", "service.yaml", "hpa.yaml", "pdb.yaml"}`` for ``source``."""
    return {
        "deployment.yaml": deployment(source, trusted_keys),
        "service.yaml": service(source),
        "hpa.yaml": autoscaler(source),
        "pdb.yaml": disruption_budget(source),
    }


def _selector(source: ExportSource) -> dict[str, str]:
    return {"app.kubernetes.io/name": pod.resource_name(source)}


def _metadata(source: ExportSource) -> dict[str, Any]:
    return {"name": pod.resource_name(source), "labels": pod.labels(source)}


def deployment(source: ExportSource, trusted_keys: str | None) -> dict[str, Any]:
    """The Deployment: ``min_replicas`` pods of the server's container."""
    template = {
        "metadata": {
            "labels": pod.labels(source),
            "annotations": pod.prometheus_annotations(source),
        },
        "spec": {
            "securityContext": pod.pod_security(),
            "terminationGracePeriodSeconds": pod.grace_seconds(source),
            "automountServiceAccountToken": False,
            "containers": [pod.container(source, "server", trusted_keys)],
            "volumes": [pod.TMP_VOLUME],
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(source),
        "spec": {
            "replicas": source.spec.deploy.min_replicas,
            "selector": {"matchLabels": _selector(source)},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
            },
            "template": template,
        },
    }


def service(source: ExportSource) -> dict[str, Any]:
    """The ClusterIP Service: one named port per server port, each with its
    ``appProtocol``."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(source),
        "spec": {
            "type": "ClusterIP",
            "selector": _selector(source),
            "ports": [
                {
                    "name": port["name"],
                    "port": port["containerPort"],
                    "targetPort": port["name"],
                    "protocol": "TCP",
                    "appProtocol": APP_PROTOCOLS[port["name"]],
                }
                for port in pod.ports(source, "grpc")
            ],
        },
    }


def autoscaler(source: ExportSource) -> dict[str, Any]:
    """The HPA: ``min_replicas``..``max_replicas`` on average CPU utilization."""
    deploy = source.spec.deploy
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _metadata(source),
        "spec": {
            "scaleTargetRef": {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": pod.resource_name(source),
            },
            "minReplicas": deploy.min_replicas,
            "maxReplicas": deploy.max_replicas,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {
                            "type": "Utilization",
                            "averageUtilization": deploy.target_cpu_utilization,
                        },
                    },
                }
            ],
        },
    }


def disruption_budget(source: ExportSource) -> dict[str, Any]:
    """The PDB: at most ``max_unavailable`` pods evicted at once."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(source),
        "spec": {
            "maxUnavailable": source.spec.deploy.max_unavailable,
            "selector": {"matchLabels": _selector(source)},
        },
    }
