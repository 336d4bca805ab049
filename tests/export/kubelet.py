"""The kubelet's probe rules (Kubernetes' "Configure Liveness, Readiness and Startup
Probes" and the pod lifecycle docs), played over a server's timeline: no cluster can run
here, so the exported container's probes are checked by these rules.

* with a ``startupProbe``, no other probe runs until it succeeds; it runs every
  ``periodSeconds`` from ``initialDelaySeconds``, and ``failureThreshold`` failures in a
  row kill the container;
* ``livenessProbe`` (after the startup probe's success, or from its own initial delay):
  ``failureThreshold`` failures in a row kill the container;
* ``readinessProbe``: the pod is in the Service's endpoints while it passes; it never
  kills;
* a probe on a port the server does not listen on fails.

What a probe gets from the server is the :class:`Timeline`'s: it listens from
``listening_s``; it is *live* from then on, *ready* from ``ready_s`` (engines loaded and
warmed up) until ``unready_s`` (a model unloaded). Which question a probe asks (``grpc``
service ``""`` or ``liveness``, an HTTP path) follows :mod:`mmaas.core.endpoints`, and the
real server's answers to exactly those questions are tested apart
(tests/server/test_health_probes.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mmaas.core.endpoints import LIVE_PATH, LIVENESS_SERVICE, READY_PATH


@dataclass(frozen=True)
class Timeline:
    """A server's life from the container's start, in seconds."""

    ports: frozenset[int]
    listening_s: float
    ready_s: float
    unready_s: float = float("inf")


@dataclass(frozen=True)
class Outcome:
    """What the kubelet did: when it killed the container (None: never, within the
    horizon) and whether the pod was ever in the endpoints."""

    killed_at: float | None
    ever_ready: bool


def answers(probe: dict[str, Any], server: Timeline, t: float) -> bool:
    """Whether ``probe``'s check passes against ``server`` at ``t``."""
    handler = probe.get("grpc") or probe.get("httpGet") or {}
    if handler.get("port") not in server.ports or t < server.listening_s:
        return False
    if "grpc" in probe:
        asks_live = handler.get("service", "") == LIVENESS_SERVICE
    else:
        assert handler["path"] in (LIVE_PATH, READY_PATH), handler
        asks_live = handler["path"] == LIVE_PATH
    return asks_live or server.ready_s <= t < server.unready_s


def run_kubelet(container: dict[str, Any], server: Timeline, horizon_s: float) -> Outcome:
    """Play the probes of ``container`` over ``server`` until ``horizon_s``."""
    startup = container.get("startupProbe")
    started_at = None if startup else 0.0
    live = container["livenessProbe"]
    ready = container["readinessProbe"]
    failures = {"startup": 0, "live": 0}
    ever_ready = False
    t = 0.0
    step = 0.5
    while t <= horizon_s:
        if started_at is None and _due(startup, t, 0.0):
            if answers(startup, server, t):
                started_at = t
            else:
                failures["startup"] += 1
                if failures["startup"] >= startup.get("failureThreshold", 3):
                    return Outcome(t, ever_ready)
        if started_at is not None:
            if _due(live, t, started_at):
                failures["live"] = 0 if answers(live, server, t) else failures["live"] + 1
                if failures["live"] >= live.get("failureThreshold", 3):
                    return Outcome(t, ever_ready)
            if _due(ready, t, started_at) and answers(ready, server, t):
                ever_ready = True
        t += step
    return Outcome(None, ever_ready)


def _due(probe: dict[str, Any], t: float, since: float) -> bool:
    first = since + probe.get("initialDelaySeconds", 0)
    period = probe.get("periodSeconds", 10)
    return t >= first and abs(((t - first) / period) - round((t - first) / period)) < 1e-9
