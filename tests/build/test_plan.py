"""The build plan: pure and derived from the spec alone; labels, the server's environment
and the build request; a digest that follows the spec; an engine request that leaves out
what does not change the engine (C13); the ports exposed and turned off."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from plans import plan_of

from mmaas.build.context import TOOLKIT_DIR
from mmaas.build.plan import engine_inputs, make_plan
from mmaas.build.render import render_dockerfile


def test_labels_env_and_build_request(det) -> None:
    plan = plan_of(det, engine_dir=Path("engine"))
    assert plan.image == "mmaas/ppocr-det:1.0.0"
    assert plan.labels["io.mmaas.model.name"] == "ppocr-det"
    assert plan.labels["org.opencontainers.image.version"] == "1.0.0"
    assert plan.labels["io.mmaas.spec.digest"] == det.spec.digest()
    assert plan.values["env"] == {
        "MMAAS_HTTP_PORT": "8000",
        "MMAAS_GRPC_PORT": "8001",
        "MMAAS_METRICS_PORT": "8002",
        "MMAAS_INSTANCE_COUNT": "1",
        "MMAAS_SHUTDOWN_GRACE_S": "25",
        "MMAAS_GRPC_KEEPALIVE_TIME_MS": "7200000",
        "MMAAS_GRPC_KEEPALIVE_TIMEOUT_MS": "20000",
        "MMAAS_GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS": "true",
        "MMAAS_GRPC_HTTP2_MIN_PING_INTERVAL_WITHOUT_DATA_MS": "5000",
        "MMAAS_GRPC_HTTP2_MAX_PING_STRIKES": "2",
    }
    stamp = json.loads(plan.generated["build-request.json"])
    assert (stamp["name"], stamp["version"], stamp["spec_digest"]) == (
        "ppocr-det",
        "1.0.0",
        det.spec.digest(),
    )
    (engine,) = stamp["engines"]
    assert (engine["name"], engine["directory"], engine["model"]["name"]) == (
        "model",
        ".",
        "ppocr-det",
    )
    assert engine["model"]["inputs"][0] == {
        "name": "x",
        "datatype": "FP32",
        "shape": [-1, 3, -1, -1],
        "min": [1, 3, 32, 32],
        "opt": [1, 3, 640, 640],
        "max": [4, 3, 1280, 1280],
        "optional": False,
        "sample_values": None,
    }
    assert stamp["assets"] == [] and stamp["pipeline"] is None
    request = json.loads(plan_of(det).generated["engine-request.json"])
    assert request["source"] == "model/ch_PP-OCRv4_det_infer.onnx"
    assert request["settings"]["graph_optimization_level"] == "all"


def test_plan_digest_follows_the_spec(det) -> None:
    first, again = plan_of(det), plan_of(det)
    assert first.digest == again.digest
    changed = det.spec.model_copy(update={"version": "1.0.1"})
    other = make_plan(changed, det.source_path, toolkit_dir=TOOLKIT_DIR, buildkit=True)
    assert other.digest != first.digest


def test_engine_request_leaves_out_what_does_not_change_the_engine(det) -> None:
    """C13: name, version, description, runtime settings, labels and the other back end's
    settings change neither the engine request nor the engine inputs (read by the
    compile), so the compile layer is reused."""
    first = plan_of(det)
    changed = det.spec.model_copy(
        update={
            "name": "renamed",
            "version": "2.0.0",
            "description": "new words",
            "runtime": det.spec.runtime.model_copy(update={"grpc_port": 9001, "instance_count": 2}),
            "image": det.spec.image.model_copy(update={"labels": {"team": "ocr"}}),
            "build": det.spec.build.model_copy(update={"workspace": 4096}),
        }
    )
    second = make_plan(changed, det.source_path, toolkit_dir=TOOLKIT_DIR, buildkit=True)
    assert second.generated["engine-request.json"] == first.generated["engine-request.json"]
    assert engine_inputs(changed, det.source_path, toolkit_dir=TOOLKIT_DIR) == engine_inputs(
        det.spec, det.source_path, toolkit_dir=TOOLKIT_DIR
    )
    request = json.loads(first.generated["engine-request.json"])
    assert (request["model"]["name"], request["model"]["version"]) == ("engine", "0")
    assert request["settings"] == {"graph_optimization_level": "all", "gpu": None}
    assert request["source"] == "model/ch_PP-OCRv4_det_infer.onnx"
    basic = det.spec.build.onnxruntime.model_copy(update={"graph_optimization_level": "basic"})
    stricter = det.spec.model_copy(
        update={"build": det.spec.build.model_copy(update={"onnxruntime": basic})}
    )
    third = make_plan(stricter, det.source_path, toolkit_dir=TOOLKIT_DIR, buildkit=True)
    assert third.generated["engine-request.json"] != first.generated["engine-request.json"]


def test_metrics_port_zero_turns_the_endpoint_off(det) -> None:
    runtime = det.spec.runtime.model_copy(update={"metrics_port": 0})
    off = replace(det, spec=det.spec.model_copy(update={"runtime": runtime}))
    plan = plan_of(off, engine_dir=Path("engine"))
    assert plan.values["env"]["MMAAS_METRICS_PORT"] == "0"
    assert "EXPOSE 8000 8001\n" in render_dockerfile(plan)


def test_http_port_is_exposed_and_set_and_zero_turns_it_off(det) -> None:
    plan = plan_of(det, engine_dir=Path("engine"))
    assert "EXPOSE 8000 8001 8002\n" in render_dockerfile(plan)
    runtime = det.spec.runtime.model_copy(update={"http_port": 0, "grpc_port": 9001})
    off = replace(det, spec=det.spec.model_copy(update={"runtime": runtime}))
    plan = plan_of(off, engine_dir=Path("engine"))
    assert plan.values["env"]["MMAAS_HTTP_PORT"] == "0"
    assert "EXPOSE 9001 8002\n" in render_dockerfile(plan)
