"""model.yaml's ``runtime:`` as the image's environment: the ``ENV`` lines of the
Dockerfile, the ports it EXPOSEs, and (through :mod:`mmaas.export.pod`) a Pod's ``env``.

Both read the runtime settings table (:mod:`mmaas.core.runtime_settings`): one variable per
row that model.yaml gives a value, spelled as the server reads it back.
"""

from __future__ import annotations

from mmaas.core.runtime_settings import SETTINGS
from mmaas.spec.model import ModelSpec


def runtime_env(spec: ModelSpec) -> dict[str, str]:
    """The ``MMAAS_*`` variables that carry ``runtime`` from model.yaml into the image, in
    table order, each as its row writes it (``25`` seconds, ``true``, ``4,8``). A row
    model.yaml gives no value (``max_message_size: null``, the settings of a
    ``dynamic_batching`` left out, and the switch ``MMAAS_DYNAMIC_BATCHING`` then) gets no
    line: the server takes its default."""
    env: dict[str, str] = {}
    for setting in SETTINGS:
        value = spec.runtime.value(setting)
        if value is not None:
            env[setting.env] = setting.format(value)
    return env


def served_ports(spec: ModelSpec) -> dict[str, int]:
    """The ports the server listens on, by role (``http``: KServe v2 HTTP/REST;
    ``grpc``: KServe v2 gRPC and health; ``metrics``: Prometheus ``/metrics``), an endpoint
    set to 0 (off) left out: what the image EXPOSEs and every port ``mmaas export`` names
    (C32)."""
    runtime = spec.runtime
    ports = {"http": runtime.http_port, "grpc": runtime.grpc_port, "metrics": runtime.metrics_port}
    return {role: port for role, port in ports.items() if port}
