"""The build plan: a completed ModelSpec -> everything ``docker build`` needs. Pure.

No I/O happens here: the plan lists the files to stage (C14: the context for one model
holds only that model's files), the generated files' text (``engine-request.json`` for the
compile, ``build-request.json`` for the stamp step; see :mod:`mmaas.stage.build`), the template
and its values, labels and the image reference, and a digest of all of it. So ``mmaas
render`` shows exactly what ``mmaas build`` sends, and a rendered Dockerfile can be compared
byte for byte with a golden file. Layer reuse (C13): the compile reads only the engine
request and the engine inputs (:func:`engine_inputs`), so a change to the model's name,
version, runtime settings, labels, README or the runtime code does not re-run it; and the
package build stages the engine directory, not the ONNX file, so it is the same build
whether the engine was compiled just now or came from the engine cache.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from mmaas.backends import CompileRequest
from mmaas.backends.tensorrt.target import (
    REQUIREMENTS,
    TENSORRT_STAGE_MODULES,
    tensorrt_plan_values,
)
from mmaas.core.hashing import bytes_digest
from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.spec.model import InputSpec, ModelSpec, OutputSpec

TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "templates"
MODEL_DIR = "/opt/mmaas/model"
ENGINE_DIR = "/opt/mmaas/engine"  # the builder stage's compiled (or cached) engine directory
ENGINE_CONTEXT = "engine"  # the package build's engine directory in its build context
# name and version of the engine request's model: neutral, so that the compile's layer
# and the engine-cache key survive a rename or a version bump (the stamp step sets them).
ENGINE_MODEL = ("engine", "0")
# Modules the builder stage runs (``python -m mmaas.stage``): only these are copied into
# it, so a change to the server or CLI does not re-run the engine compile (C13).
STAGE_MODULES = (
    "__init__.py",
    "errors.py",
    "hashing.py",
    "manifest.py",
    "datatypes.py",
    "samples.py",
    "gates.py",
    "gates_latency.py",
    "model_dir.py",
    "stage.py",
    "backends/__init__.py",
)
LABEL_PREFIX = "io.mmaas"


@dataclass(frozen=True)
class ContextFile:
    """A host file copied into the staged build context at ``target`` (relative path)."""

    source: Path
    target: str


@dataclass(frozen=True)
class BuildPlan:
    """Everything one image build needs.

    Attributes:
        image: ``repository:tag`` of the image.
        template: template file name under ``templates/``.
        values: the template's values (computed here; templates hold no logic).
        files: host files to stage into the context.
        generated: context-relative path -> text of files made for this build.
        labels: OCI + mmaas labels known before the build (the engine hash is added after).
        digest: ``sha256:<hex>`` of all of the above.
    """

    image: str
    template: str
    values: dict[str, Any]
    files: tuple[ContextFile, ...]
    generated: dict[str, str]
    labels: dict[str, str]
    digest: str = ""


def model_info(spec: ModelSpec) -> ModelInfo:
    """The served signature of a completed spec (every tensor has datatype and shape)."""
    return ModelInfo(
        name=spec.name,
        version=spec.version,
        backend=spec.backend,
        precision=spec.target_precision,
        max_batch_size=spec.max_batch_size,
        inputs=tuple(_tensor(t) for t in spec.inputs),
        outputs=tuple(_tensor(t) for t in spec.outputs),
    )


def make_plan(
    spec: ModelSpec,
    source: Path,
    *,
    toolkit_dir: Path,
    buildkit: bool,
    ca_bundle: Path | None = None,
    external_data: Sequence[str] = (),
    model_dir: Path | None = None,
    engine_key: str | None = None,
    engine_dir: Path | None = None,
) -> BuildPlan:
    """Plan one of the two builds of a completed ``spec`` whose ONNX file is ``source``:
    the compile build (``engine_dir`` None; its last stage holds the compiled engine
    directory at :data:`ENGINE_DIR`) or the package build of the image around the verified
    engine directory ``engine_dir`` (just compiled, or an engine-cache hit). The package
    build is the same whichever way the engine came, so its layers are reused (C13).

    Args:
        external_data: the ONNX file's external data locations (relative to its folder,
            nested paths included); staged beside it.
        toolkit_dir: the installed ``mmaas`` package directory (copied into the image).
        buildkit: whether the builder supports ``RUN --mount`` cache mounts.
        ca_bundle: a PEM bundle trusted by pip inside the build, or None.
        model_dir: the model folder (``checks.accuracy.samples`` are relative to it);
            default ``source``'s folder.
        engine_key: the engine-cache key (:mod:`mmaas.build.cache.key`), recorded in the
            manifest; None when it could not be computed.
        engine_dir: the engine directory to package, or None for the compile build.
    """
    inputs = engine_inputs(
        spec, source, toolkit_dir=toolkit_dir, external_data=external_data, model_dir=model_dir
    )
    engine = engine_spec(spec, source)
    engine_request = {**engine, "spec_digest": _canonical_digest(engine), "engine_key": engine_key}
    build_request = {
        **engine,
        "model": asdict(model_info(spec)),
        "settings": spec.build.model_dump(mode="json"),
        "spec_digest": spec.digest(),
        "engine_key": engine_key,
    }
    staged = (
        (
            *[f for f in inputs if f.target.startswith("stage-lib/") or f.target == REQUIREMENTS],
            ContextFile(engine_dir, ENGINE_CONTEXT),
        )
        if engine_dir is not None
        else inputs
    )
    files = [
        *staged,
        ContextFile(TEMPLATES_DIR / "requirements-runtime.txt", "requirements-runtime.txt"),
        ContextFile(toolkit_dir, "lib/mmaas"),
    ]
    if ca_bundle is not None:
        files.append(ContextFile(ca_bundle, "ca-bundle.pem"))
    labels = {
        "org.opencontainers.image.title": spec.name,
        "org.opencontainers.image.version": spec.version,
        "org.opencontainers.image.description": spec.description or f"{spec.name} (mmaas)",
        f"{LABEL_PREFIX}.model.name": spec.name,
        f"{LABEL_PREFIX}.model.version": spec.version,
        f"{LABEL_PREFIX}.backend": spec.backend,
        f"{LABEL_PREFIX}.precision": spec.target_precision,
        f"{LABEL_PREFIX}.spec.digest": build_request["spec_digest"],
        **spec.image.labels,
    }
    values = {
        "base_image": spec.image.base_image,
        "buildkit": buildkit,
        "ca_bundle": ca_bundle is not None,
        "phase": "compile" if engine_dir is None else "package",
        "model_dir": MODEL_DIR,
        "engine_dir": ENGINE_DIR,
        "env": runtime_env(spec),
        "ports": [port for port in (spec.runtime.grpc_port, spec.runtime.metrics_port) if port],
        "labels": labels,
        **(tensorrt_plan_values(spec) if spec.backend == "tensorrt" else {}),
    }
    generated = {"build-request.json": _json(build_request)}
    if engine_dir is None:
        generated["engine-request.json"] = _json(engine_request)
    plan = BuildPlan(
        image=f"{spec.image_repository}:{spec.image_tag}",
        template=f"Dockerfile.{spec.backend}.j2",
        values=values,
        files=tuple(files),
        generated=generated,
        labels=labels,
    )
    return BuildPlan(**{**plan.__dict__, "digest": _digest(plan)})


def engine_inputs(
    spec: ModelSpec,
    source: Path,
    *,
    toolkit_dir: Path,
    external_data: Sequence[str] = (),
    model_dir: Path | None = None,
) -> tuple[ContextFile, ...]:
    """The files the engine compile reads, as staged: the ONNX file and its external data
    (``model/``), the accuracy gate's samples (``model/<path in the model folder>``) and
    the builder stage's mmaas modules (``stage-lib/mmaas/``); for TensorRT also the INT8
    calibration cache (``model/<build.tensorrt.calibration_cache>``, where the back end
    looks for it: beside the ONNX file), the TensorRT stage modules and
    ``requirements-tensorrt.txt``. Their bytes are part of the engine-cache key."""
    folder = model_dir or source.parent
    samples = spec.checks.accuracy.samples if spec.checks.accuracy else []
    modules: tuple[str, ...] = (*STAGE_MODULES, f"backends/{spec.backend}.py")
    extra: tuple[ContextFile, ...] = ()
    if spec.backend == "tensorrt":
        modules = (*STAGE_MODULES, *TENSORRT_STAGE_MODULES)
        calibration = spec.build.tensorrt.calibration_cache
        extra = (
            ContextFile(TEMPLATES_DIR / REQUIREMENTS, REQUIREMENTS),
            *([ContextFile(folder / calibration, f"model/{calibration}")] if calibration else []),
        )
    return (
        ContextFile(source, f"model/{source.name}"),
        *(ContextFile(source.parent / name, f"model/{name}") for name in external_data),
        *(ContextFile(folder / name, f"model/{name}") for name in samples),
        *extra,
        *(ContextFile(toolkit_dir / name, f"stage-lib/mmaas/{name}") for name in modules),
    )


def engine_spec(spec: ModelSpec, source: Path) -> dict[str, Any]:
    """The build-relevant part of a completed spec, normalised: the served signature with
    a neutral name and version, the back end's own build settings only, the gates, and
    the staged paths of the source and samples. Everything else in model.yaml (name,
    version, description, runtime, image) leaves the engine unchanged."""
    model = replace(model_info(spec), name=ENGINE_MODEL[0], version=ENGINE_MODEL[1])
    build = spec.build.model_dump(mode="json")
    settings = (
        {"onnxruntime": build["onnxruntime"]}
        if spec.backend == "onnxruntime"
        else {
            **{k: v for k, v in build.items() if k != "onnxruntime"},
            "tensorrt": {k: v for k, v in build["tensorrt"].items() if k != "runtime_image"},
        }
    )
    samples = spec.checks.accuracy.samples if spec.checks.accuracy else []
    return {
        "model": asdict(model),
        "settings": settings,
        "checks": spec.checks.model_dump(mode="json"),
        "source": f"model/{source.name}",
        "samples": [f"model/{s}" for s in samples],
    }


def runtime_env(spec: ModelSpec) -> dict[str, str]:
    """The ``MMAAS_*`` variables that carry ``runtime`` from model.yaml into the image
    (the server reads only its environment; see ``mmaas.server.settings``). An unset
    ``max_message_size`` is left to the server, which derives it from the manifest;
    ``dynamic_batching`` becomes ``MMAAS_DYNAMIC_BATCHING`` and its three settings."""
    env = {
        "MMAAS_GRPC_PORT": str(spec.runtime.grpc_port),
        "MMAAS_METRICS_PORT": str(spec.runtime.metrics_port),
        "MMAAS_INSTANCE_COUNT": str(spec.runtime.instance_count),
    }
    if spec.runtime.max_message_size:
        env["MMAAS_MAX_MESSAGE_SIZE"] = str(spec.runtime.max_message_size)
    batching = spec.runtime.dynamic_batching
    if batching is not None:
        env["MMAAS_DYNAMIC_BATCHING"] = "true"
        env["MMAAS_PREFERRED_BATCH_SIZES"] = ",".join(map(str, batching.preferred_batch_size))
        env["MMAAS_MAX_QUEUE_DELAY_US"] = str(batching.max_queue_delay_microseconds)
        env["MMAAS_MAX_QUEUE_SIZE"] = str(batching.max_queue_size)
    return env


def compile_request(spec: ModelSpec, source: Path, out_dir: Path) -> CompileRequest:
    """The back end's compile request for a completed ``spec`` whose ONNX file is
    ``source`` (used on the host by ``mmaas serve``; the image gets the same fields as
    ``build-request.json``)."""
    return CompileRequest(
        model=model_info(spec),
        source=source,
        out_dir=out_dir,
        settings=spec.build.model_dump(mode="json"),
    )


def _tensor(spec: InputSpec | OutputSpec) -> TensorInfo:
    profile = (
        {"min": spec.min, "opt": spec.opt, "max": spec.max} if isinstance(spec, InputSpec) else {}
    )
    return TensorInfo(
        name=spec.name, datatype=spec.datatype or "FP32", shape=tuple(spec.shape or ()), **profile
    )


def _json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2) + "\n"


def _canonical_digest(data: dict[str, Any]) -> str:
    return bytes_digest(json.dumps(data, sort_keys=True, separators=(",", ":")).encode())


def _digest(plan: BuildPlan) -> str:
    body = {
        "image": plan.image,
        "template": plan.template,
        "values": plan.values,
        "files": [f.target for f in plan.files],
        "generated": plan.generated,
        "labels": plan.labels,
    }
    return bytes_digest(json.dumps(body, sort_keys=True, default=str).encode())
