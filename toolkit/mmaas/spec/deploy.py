"""``deploy:`` in model.yaml: how ``mmaas export kserve`` sizes and scales the model on
Kubernetes (the image and the server never read it; it only changes the exported objects).

Quantities are Kubernetes resource quantities (``500m``, ``2``, ``1536Mi``, ``2Gi``:
``k8s.io/apimachinery`` ``resource.Quantity``). ``memory`` unset is derived from the
engine at export time (:func:`mmaas.export.pod.memory_request`).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

# resource.Quantity's grammar: a decimal number with an optional binary (Ki..Ei), decimal
# SI (m, k, M, G, T, P, E) or exponent suffix.
QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?([KMGTPE]i|[mkMGTPE]|[eE][0-9]+)?$"
Quantity = Annotated[str, Field(pattern=QUANTITY_PATTERN)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ResourcesSpec(_Strict):
    """The container's resources. ``cpu``: the CPU request (cores, e.g. ``"2"`` or
    ``"500m"``; the server's intra-op threads follow it, ``MMAAS_THREADS``); ``cpu_limit``:
    a CPU limit (none by default: a limit throttles latency-bound work); ``memory``: the
    memory request and limit (default: derived from the engine's size and the instance
    count); ``gpu``: ``nvidia.com/gpu`` devices (default: 1 for a GPU back end, else 0)."""

    cpu: Quantity = "1"
    cpu_limit: Quantity | None = None
    memory: Quantity | None = None
    gpu: Annotated[int, Field(ge=0, le=16)] | None = None


class DeploySpec(_Strict):
    """Scaling and rollout of the exported Kubernetes objects.

    ``min_replicas`` / ``max_replicas``: the HorizontalPodAutoscaler's (KServe's
    ``minReplicas`` / ``maxReplicas``); ``target_cpu_utilization``: percent of the CPU
    request at which it scales out; ``max_unavailable``: the PodDisruptionBudget's (how
    many pods a voluntary eviction, e.g. a node drain, may take at once; at least 1, so a
    drain never blocks on a single replica); ``pre_stop_seconds``: how long a
    pod keeps serving normally after it is removed from the endpoints, before SIGTERM
    starts the server's drain (load balancers and kube-proxy need a few seconds to stop
    routing to it)."""

    resources: ResourcesSpec = Field(default_factory=ResourcesSpec)
    min_replicas: Annotated[int, Field(ge=1, le=1000)] = 1
    max_replicas: Annotated[int, Field(ge=1, le=1000)] = 1
    target_cpu_utilization: Annotated[int, Field(ge=1, le=100)] = 80
    max_unavailable: Annotated[int, Field(ge=1, le=1000)] = 1
    pre_stop_seconds: Annotated[int, Field(ge=0, le=300)] = 5

    @model_validator(mode="after")
    def _replicas_ordered(self) -> DeploySpec:
        if self.max_replicas < self.min_replicas:
            raise ValueError(
                f"max_replicas {self.max_replicas} is below min_replicas {self.min_replicas}; "
                "raise max_replicas"
            )
        return self
