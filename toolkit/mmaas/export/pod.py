"""The pod every export describes: the server's container (image, ports, environment,
probes, resources, security context, preStop) and the pod-level settings that fit it.

Facts the objects follow (Kubernetes ``core/v1``):

* ports: every port the server listens on (:func:`mmaas.build.runtime_env.served_ports`), named
  so that a mesh treats gRPC as HTTP/2 (``grpc``; Istio reads the name's prefix) and the
  REST and metrics ports as HTTP (``http``, ``http-metrics``) (C32); the routed one first
  (KServe's raw Service maps its port 80 to the container's first port);
* probes, every one on the routed port (the one port every mode declares and routes):
  Kubernetes' native ``grpc`` probe of the standard ``grpc.health.v1`` service, or HTTP
  KServe v2's paths (:mod:`mmaas.core.endpoints`). Readiness and the startup probe ask
  *ready* (service ``""`` / ``/v2/health/ready``: NOT_SERVING until every engine is
  verified, loaded and warmed up, after a model is unloaded, and from SIGTERM on);
  liveness asks *live* (service ``liveness`` / ``/v2/health/live``: up as soon as the
  process answers, whatever the models' states), so an unloaded model takes the pod out
  of the endpoints but never gets it restarted. The startup probe, in every mode, holds
  liveness back for :func:`startup_seconds`, sized from the engine's load time measured
  at build;
* drain: the pod leaves the endpoints, keeps serving ``deploy.pre_stop_seconds`` (the
  preStop ``sleep``), then SIGTERM: the server reports NOT_SERVING, keeps its ports open
  for ``MMAAS_SHUTDOWN_GRACE_S`` while in-flight requests finish, and exits; so
  ``terminationGracePeriodSeconds`` = preStop + grace + :data:`KILL_MARGIN_S`;
* security: the image's non-root user 10001, a read-only root file system (``/tmp`` an
  ``emptyDir``), no privilege escalation, every capability dropped, the runtime's
  default seccomp profile (the ``restricted`` Pod Security Standard);
* resources: ``deploy.resources`` (memory derived from the engine when unset:
  :func:`memory_request`), ``nvidia.com/gpu`` for a GPU back end, and
  ``MMAAS_THREADS`` set from the CPU request (a container sees every core of its node,
  so ONNX Runtime's default of one thread per core would oversubscribe the request).
"""

from __future__ import annotations

import math
import re
from typing import Any

from mmaas.backends import get_target
from mmaas.build.runtime_env import runtime_env, served_ports
from mmaas.core.endpoints import LIVE_PATH, LIVENESS_SERVICE, READY_PATH
from mmaas.core.errors import UsageError
from mmaas.core.model_manifest import engine_set_digest
from mmaas.core.runtime_settings import EXPECTED_ENGINE, LOG_FORMAT, THREADS, TRUSTED_KEYS
from mmaas.export.source import ExportSource

CONTAINER_USER = 10001  # the image's USER (templates/Dockerfile.*.j2)
KILL_MARGIN_S = 5  # SIGKILL comes this long after the server's grace period at the latest
PORT_NAMES = {"http": "http", "grpc": "grpc", "metrics": "http-metrics"}
GPU_RESOURCE = "nvidia.com/gpu"
MEMORY_BASE_MIB = 512  # the interpreter, gRPC, numpy and the back end's own arenas
MEMORY_STEP_MIB = 256
TMP_VOLUME = {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}}
# the startup probe: a node may be slower than the builder and start with a cold page cache
STARTUP_PERIOD_S = 2
STARTUP_MARGIN = 10
STARTUP_MIN_S = 60
STARTUP_UNMEASURED_S = 600
HASH_BYTES_PER_S = 50 * 2**20
_CPU = re.compile(r"^(?P<number>[0-9]+(?:\.[0-9]+)?)(?P<milli>m)?$")


def ports(source: ExportSource, first: str, only: bool = False) -> list[dict[str, Any]]:
    """The container's ``ports``: the ``first`` role's port (``grpc`` or ``http``), then
    every other port the server listens on (``only``: none other)."""
    served = served_ports(source.spec)
    roles = [first] + ([] if only else [role for role in served if role != first])
    return [
        {"name": PORT_NAMES[role], "containerPort": served[role], "protocol": "TCP"}
        for role in roles
    ]


def check_routed(source: ExportSource, first: str) -> None:
    """Raise UsageError when the ``first`` (routed) role's port is off in model.yaml."""
    if first not in served_ports(source.spec):
        raise UsageError(
            f"model {source.spec.name!r} has runtime.{first}_port 0 (off), so it cannot be "
            f"served over {first.upper()}",
            hint=f"set runtime.{first}_port in model.yaml, or export the other protocol",
        )


def probes(source: ExportSource, first: str) -> dict[str, dict[str, Any]]:
    """``startupProbe`` (:func:`startup_seconds` of bring-up), ``readinessProbe`` and
    ``livenessProbe``, all on the routed (``first``) port: ready for the first two, live
    for liveness (see the module doc)."""
    port = served_ports(source.spec)[first]
    if first == "grpc":
        ready: dict[str, Any] = {"grpc": {"port": port}}
        live: dict[str, Any] = {"grpc": {"port": port, "service": LIVENESS_SERVICE}}
    else:
        ready = {"httpGet": {"path": READY_PATH, "port": port}}
        live = {"httpGet": {"path": LIVE_PATH, "port": port}}
    attempts = math.ceil(startup_seconds(source) / STARTUP_PERIOD_S)
    return {
        "startupProbe": {
            **ready,
            "periodSeconds": STARTUP_PERIOD_S,
            "timeoutSeconds": 2,
            "failureThreshold": attempts,
        },
        "readinessProbe": {**ready, "periodSeconds": 5, "timeoutSeconds": 2, "failureThreshold": 2},
        "livenessProbe": {**live, "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 3},
    }


def startup_seconds(source: ExportSource) -> int:
    """How long the startup probe lets the server come up: :data:`STARTUP_MARGIN` times the
    bring-up the build measured (per instance: the engine's load, ``load_ms`` in the build
    report, and one run at each profile point, the warm-up's bound; times
    ``runtime.instance_count``; plus re-hashing the engine files at
    :data:`HASH_BYTES_PER_S`), at least :data:`STARTUP_MIN_S`; :data:`STARTUP_UNMEASURED_S`
    for an engine whose report has no load time."""
    report = source.manifest.report
    if "load_ms" not in report:
        return STARTUP_UNMEASURED_S
    warm_ms = sum(point.get("latency_ms", 0.0) for point in report.get("profile_check", []))
    per_instance = (report["load_ms"] + warm_ms) / 1000
    engine = source.manifest.engine.size_bytes + sum(
        f.size_bytes for f in source.manifest.engine_data
    )
    measured = per_instance * source.spec.runtime.instance_count + engine / HASH_BYTES_PER_S
    return max(STARTUP_MIN_S, math.ceil(STARTUP_MARGIN * measured))


def container_security() -> dict[str, Any]:
    """The container ``securityContext`` (restricted Pod Security Standard)."""
    return {
        "runAsNonRoot": True,
        "runAsUser": CONTAINER_USER,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def pod_security() -> dict[str, Any]:
    """The pod ``securityContext``."""
    return {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}


def grace_seconds(source: ExportSource) -> int:
    """``terminationGracePeriodSeconds``: preStop + the server's drain
    (``runtime.shutdown_grace_seconds``, the image's ``MMAAS_SHUTDOWN_GRACE_S``) +
    :data:`KILL_MARGIN_S`, rounded up."""
    drain = source.spec.runtime.shutdown_grace_seconds
    return math.ceil(source.spec.deploy.pre_stop_seconds + drain) + KILL_MARGIN_S


def lifecycle(source: ExportSource) -> dict[str, Any]:
    """The preStop hook (Kubernetes' built-in ``sleep`` action: no binary needed in the
    image); empty when ``deploy.pre_stop_seconds`` is 0."""
    seconds = source.spec.deploy.pre_stop_seconds
    return {"preStop": {"sleep": {"seconds": seconds}}} if seconds else {}


def resources(source: ExportSource) -> dict[str, Any]:
    """``requests`` and ``limits``: CPU request (limit only when set), memory request =
    limit, ``nvidia.com/gpu`` when the model runs on a GPU."""
    spec = source.spec.deploy.resources
    memory = spec.memory or memory_request(source)
    requests: dict[str, Any] = {"cpu": spec.cpu, "memory": memory}
    limits: dict[str, Any] = {"memory": memory}
    if spec.cpu_limit:
        limits["cpu"] = spec.cpu_limit
    gpus = gpu_count(source)
    if gpus:
        requests[GPU_RESOURCE] = str(gpus)  # a quantity: a string in core/v1's types
        limits[GPU_RESOURCE] = str(gpus)
    return {"requests": requests, "limits": limits}


def gpu_count(source: ExportSource) -> int:
    """``deploy.resources.gpu``, else 1 for a back end that serves on a GPU, else 0."""
    chosen = source.spec.deploy.resources.gpu
    if chosen is not None:
        return chosen
    return 1 if get_target(source.spec.backend).runs_on_gpu else 0


def memory_request(source: ExportSource) -> str:
    """The default memory request and limit: :data:`MEMORY_BASE_MIB` plus twice the
    engine's bytes (file and data files) per instance, rounded up to
    :data:`MEMORY_STEP_MIB`, as ``<N>Mi``."""
    manifest = source.manifest
    engine = manifest.engine.size_bytes + sum(f.size_bytes for f in manifest.engine_data)
    mib = MEMORY_BASE_MIB + 2 * engine * source.spec.runtime.instance_count / 2**20
    return f"{math.ceil(mib / MEMORY_STEP_MIB) * MEMORY_STEP_MIB}Mi"


def threads(source: ExportSource) -> int:
    """Intra-op threads per instance: the CPU request's whole cores over the instance
    count, at least 1."""
    found = _CPU.match(source.spec.deploy.resources.cpu)
    cores = 1.0
    if found:
        cores = float(found["number"]) / (1000 if found["milli"] else 1)
    return max(1, math.floor(cores / source.spec.runtime.instance_count))


def environment(source: ExportSource, trusted_keys: str | None) -> list[dict[str, str]]:
    """The container's ``env``: the image's ``MMAAS_*`` runtime settings (explicit, so the
    object shows what runs), ``MMAAS_THREADS``, JSON logs, the engine pin
    (``MMAAS_EXPECTED_ENGINE``: the server refuses any other engine) and, when given, the
    trusted public keys (``MMAAS_TRUSTED_KEYS``: the server refuses an engine none of
    them signed)."""
    env = {
        **runtime_env(source.spec),
        THREADS.env: THREADS.format(threads(source)),
        LOG_FORMAT.env: "json",
        EXPECTED_ENGINE.env: engine_set_digest(source.model_manifest),
    }
    if trusted_keys:
        env[TRUSTED_KEYS.env] = trusted_keys
    return [{"name": name, "value": value} for name, value in env.items()]


def container(
    source: ExportSource,
    name: str,
    trusted_keys: str | None,
    first: str = "grpc",
    serverless: bool = False,
) -> dict[str, Any]:
    """The server's container: image, ports (``first``'s routed first; ``serverless``:
    only that one, and no preStop: Knative's queue-proxy drains), env, probes,
    resources, security context and the ``/tmp`` mount."""
    check_routed(source, first)
    found = probes(source, first)
    hooks = {} if serverless else lifecycle(source)
    return {
        "name": name,
        "image": source.reference,
        "imagePullPolicy": "IfNotPresent",
        "ports": ports(source, first, only=serverless),
        "env": environment(source, trusted_keys),
        **found,
        "resources": resources(source),
        **({"lifecycle": hooks} if hooks else {}),
        "securityContext": container_security(),
        "volumeMounts": [{"name": TMP_VOLUME["name"], "mountPath": "/tmp"}],
    }


def prometheus_annotations(source: ExportSource) -> dict[str, str]:
    """``prometheus.io/*`` scrape annotations of the metrics port (none when metrics are
    off), as the Prometheus Kubernetes service discovery examples read them."""
    port = served_ports(source.spec).get("metrics")
    if not port:
        return {}
    return {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(port),
        "prometheus.io/path": "/metrics",
    }


def resource_name(source: ExportSource, prefix: str = "") -> str:
    """A DNS-1035 label from the model name (``[a-z]([-a-z0-9]*[a-z0-9])?``, at most 63
    characters: what Service and InferenceService names must be): dots and underscores
    become dashes, a leading digit gets ``m-``."""
    name = re.sub(r"[^a-z0-9-]+", "-", prefix + source.spec.name).strip("-")
    if not name[:1].isalpha():
        name = f"m-{name}"
    return name[:63].rstrip("-")


def labels(source: ExportSource) -> dict[str, str]:
    """The recommended ``app.kubernetes.io/*`` labels."""
    return {
        "app.kubernetes.io/name": resource_name(source),
        "app.kubernetes.io/version": _label_value(source.spec.version),
        "app.kubernetes.io/component": "inference-server",
        "app.kubernetes.io/managed-by": "mmaas",
    }


def _label_value(text: str) -> str:
    """A label value (``[A-Za-z0-9]([-_.A-Za-z0-9]*[A-Za-z0-9])?``, at most 63)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", text)[:63].strip("-_.")
