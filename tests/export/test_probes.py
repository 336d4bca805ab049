"""The exported probes under the kubelet's rules (tests/export/kubelet.py), in every mode:
a bring-up as slow as ten times what the build measured is never killed, a model unloaded
takes the pod out of the endpoints but never gets it restarted, and every probe is on the
one port every mode declares and routes (HTTP on or off)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from kubelet import Timeline, run_kubelet

from export_models import ENGINE_BYTES, model_copy, source_of
from mmaas.core.errors import UsageError
from mmaas.export import pod
from mmaas.export.kserve import kserve_objects
from mmaas.export.plain import plain_objects

# the build's measurement: a 2 s load and three profile-check runs of 0.5 s each
REPORT = {"load_ms": 2000.0, "profile_check": [{"latency_ms": 500.0}] * 3}
PORTS = {"http": {"http_port": 8000, "grpc_port": 9001}, "no-http": {"http_port": 0}}


def containers(source) -> dict[str, dict]:
    """Every export's server container, by mode."""
    found = {"plain": plain_objects(source, None)["deployment.yaml"]}
    found["plain"] = found["plain"]["spec"]["template"]["spec"]["containers"][0]
    for mode in ("raw", "serverless"):
        for protocol in ("grpc-v2", "v2"):
            try:
                runtime = kserve_objects(source, mode, protocol, None)["servingruntime.yaml"]
            except UsageError:  # REST routed with HTTP off: refused
                continue
            found[f"{mode}-{protocol}"] = runtime["spec"]["containers"][0]
    return found


@pytest.fixture(params=sorted(PORTS))
def source(request, tmp_path: Path, ppocr_models: dict[str, Path]):
    settings = {"runtime": {**PORTS[request.param], "instance_count": 2}}
    folder = model_copy(tmp_path, ppocr_models["ppocr-det"], settings)
    return source_of(folder, report=REPORT)


def server(container: dict, bring_up_s: float, unready_s: float = float("inf")) -> Timeline:
    ports = frozenset(p["containerPort"] for p in container["ports"])
    return Timeline(ports, listening_s=1.0, ready_s=bring_up_s, unready_s=unready_s)


def test_the_startup_probe_is_sized_from_the_measured_bring_up(source) -> None:
    """(2 s + 3 x 0.5 s) x 2 instances + 96 MiB hashed at 50 MiB/s = 8.92 s, x 10."""
    assert ENGINE_BYTES == 96 * 2**20
    assert pod.startup_seconds(source) == 90
    for name, container in containers(source).items():
        probe = container["startupProbe"]
        assert probe["periodSeconds"] * probe["failureThreshold"] == 90, name
    unmeasured = source_of(source.model_dir, report={})
    assert pod.startup_seconds(unmeasured) == pod.STARTUP_UNMEASURED_S


def test_a_slow_bring_up_is_not_killed_and_an_unload_is_not_restarted(source) -> None:
    slow = 10 * 8.92 - 3  # ten times the measured bring-up, just inside the budget
    for name, container in containers(source).items():
        up = run_kubelet(container, server(container, slow), horizon_s=900)
        assert up.killed_at is None and up.ever_ready, name
        unloaded = run_kubelet(container, server(container, 10, unready_s=60), horizon_s=900)
        assert unloaded.killed_at is None, name  # readiness fails, liveness does not
    for name, container in containers(source).items():
        never = run_kubelet(container, server(container, float("inf")), horizon_s=900)
        assert never.killed_at is not None and never.killed_at <= 92, name  # finite budget


def test_the_kubelet_check_fails_the_old_probes(source) -> None:
    """Serverless gRPC without a startup probe and liveness asking readiness: a 25 s load
    is killed, and so is a pod whose model was unloaded."""
    old = copy.deepcopy(containers(source)["serverless-grpc-v2"])
    del old["startupProbe"]
    old["livenessProbe"] = {**old["readinessProbe"], "periodSeconds": 10, "failureThreshold": 3}
    assert run_kubelet(old, server(old, 25), horizon_s=900).killed_at == 20
    assert run_kubelet(old, server(old, 5, unready_s=60), horizon_s=900).killed_at is not None


def test_every_probe_is_on_the_declared_routed_port(source) -> None:
    for name, container in containers(source).items():
        routed = container["ports"][0]["containerPort"]
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            handler = container[kind].get("grpc") or container[kind]["httpGet"]
            assert handler["port"] == routed, (name, kind)
        if "grpc" in container["livenessProbe"]:
            assert container["livenessProbe"]["grpc"]["service"] == "liveness"
        else:
            assert container["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
