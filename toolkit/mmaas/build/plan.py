"""The build plan: a completed ModelSpec -> everything ``docker build`` needs. Pure.

No Docker and no writes happen here: the plan lists the files to stage (C14: the context
for one model holds only that model's files), the mmaas wheels to pack (one per image
stage, :mod:`mmaas.build.wheel`), the generated files' text (the typed requests of
:mod:`mmaas.build.requests`, the requirements of each stage's extras and their pins), the
template and its values, labels and the image reference, and a digest of all of it. So
``mmaas render`` shows exactly what ``mmaas build`` sends, and a rendered Dockerfile can be
compared byte for byte with a golden file. Layer reuse (C13): the compile reads only the
engine request and the engine inputs (:func:`engine_inputs`: the builder wheel holds only
the stage and the back end), so a change to the model's name, version, runtime settings,
labels, README or the server or CLI code does not re-run it; and the package build stages
the engine directory, not the ONNX file, so it is the same build whether the engine was
compiled just now or came from the engine cache. Back-end specifics come from the back
end's build target (:class:`mmaas.backends.BuildTarget`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from mmaas.backends import CompileRequest, get_target
from mmaas.backends.targets import ENGINE_DIR, ContextFile
from mmaas.build.requests import engine_request
from mmaas.build.runtime_env import runtime_env, served_ports
from mmaas.build.wheel import SBOM_TOOL, pipeline_requirements, requirements
from mmaas.core import runtime_settings
from mmaas.core.hashing import bytes_digest
from mmaas.core.image_seal import ENTRYPOINT
from mmaas.core.model_request import ModelRequest
from mmaas.core.sbom import SBOM_LABEL, SBOM_PATH
from mmaas.core.templates import CONSTRAINTS, constraints_text, template_file
from mmaas.spec.engines import model_info
from mmaas.spec.model import ModelSpec

MODEL_DIR = str(runtime_settings.MODEL_DIR.default)  # the image's model: where the server looks
BUILDER_WHEEL = "wheels/builder"  # the builder stage's mmaas wheel in the build context
RUNTIME_WHEEL = "wheels/runtime"  # the runtime stage's
LABEL_PREFIX = "io.mmaas"


@dataclass(frozen=True)
class ContextWheel:
    """An mmaas wheel packed into the context directory ``target`` from the package
    directory ``root`` (the installed mmaas), holding ``packages``."""

    root: Path
    packages: tuple[str, ...]
    target: str


@dataclass(frozen=True)
class BuildPlan:
    """Everything one image build needs.

    Attributes:
        image: ``repository:tag`` of the image.
        template: template file name under ``templates/`` (package ``mmaas.templates``).
        values: the template's values (computed here; templates hold no logic).
        files: host files to stage into the context.
        wheels: mmaas wheels to pack into the context.
        generated: context-relative path -> text of files made for this build.
        labels: OCI + mmaas labels known before the build (the engine hash is added after).
        digest: ``sha256:<hex>`` of all of the above.
    """

    image: str
    template: str
    values: dict[str, Any]
    files: tuple[ContextFile, ...]
    wheels: tuple[ContextWheel, ...]
    generated: dict[str, str]
    labels: dict[str, str]
    digest: str = ""


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
) -> BuildPlan:
    """Plan the compile build of one engine: ``spec`` is a completed single-engine spec (an
    engine view, :func:`mmaas.spec.engines.engine_view`) whose ONNX file is ``source``; the
    build's last stage holds the compiled engine directory at :data:`ENGINE_DIR`.

    Args:
        external_data: the ONNX file's external data locations (relative to its folder,
            nested paths included); staged beside it.
        toolkit_dir: the installed ``mmaas`` package directory (wheels are packed from it).
        buildkit: whether the builder supports ``RUN --mount`` cache mounts.
        ca_bundle: a PEM bundle trusted by pip inside the build, or None.
        model_dir: the model folder (``checks.accuracy.samples`` are relative to it);
            default ``source``'s folder.
        engine_key: the engine-cache key (:mod:`mmaas.build.cache.key`), recorded in the
            manifest; None when it could not be computed.

    Raises:
        SpecError: the back end's build target cannot build a setting of ``spec``.
    """
    inputs = engine_inputs(
        spec, source, toolkit_dir=toolkit_dir, external_data=external_data, model_dir=model_dir
    )
    files = [item for item in inputs if isinstance(item, ContextFile)]
    wheels = [item for item in inputs if isinstance(item, ContextWheel)]
    request = engine_request(spec, source, engine_key)
    generated = {"engine-request.json": request.to_json()}
    return _plan(spec, spec, "compile", files, wheels, generated, buildkit, ca_bundle)


def make_package_plan(
    spec: ModelSpec,
    engine: ModelSpec,
    request: ModelRequest,
    tree: Sequence[ContextFile],
    *,
    toolkit_dir: Path,
    buildkit: bool,
    ca_bundle: Path | None = None,
    signed: bool = False,
) -> BuildPlan:
    """Plan the package build of the completed model ``spec``: the image around its
    verified engine directories and assets, staged as ``tree`` under
    :data:`~mmaas.backends.targets.ENGINE_CONTEXT` (laid out as the model directory will
    be: see :mod:`mmaas.stage.stamp`), stamped by ``request``. ``engine`` is one of its engine
    views: its back end makes the image (every engine of a model has the same back end).
    The build is the same whether the engines were compiled just now or came from the
    engine cache, so its layers are reused (C13). ``signed``: the image will be signed
    (``mmaas build --sign``): its runtime stage also installs the ``signing`` extra
    (``cryptography``, about 18 MB, which the server needs only to check a signature).
    """
    target = get_target(engine.backend)
    wheels = [
        ContextWheel(toolkit_dir, target.builder_packages, BUILDER_WHEEL),
        ContextWheel(toolkit_dir, target.runtime_packages, RUNTIME_WHEEL),
    ]
    generated = {"build-request.json": request.to_json(), SBOM_TOOL: template_file(SBOM_TOOL)}
    return _plan(
        spec, engine, "package", list(tree), wheels, generated, buildkit, ca_bundle, signed
    )


def _plan(
    spec: ModelSpec,
    engine: ModelSpec,
    phase: str,
    files: list[ContextFile],
    wheels: list[ContextWheel],
    generated: dict[str, str],
    buildkit: bool,
    ca_bundle: Path | None,
    signed: bool = False,
) -> BuildPlan:
    target = get_target(engine.backend)
    if ca_bundle is not None:
        files.append(ContextFile(ca_bundle, "ca-bundle.pem"))
    labels = {
        "org.opencontainers.image.title": spec.name,
        "org.opencontainers.image.version": spec.version,
        "org.opencontainers.image.description": spec.description or f"{spec.name} (mmaas)",
        f"{LABEL_PREFIX}.model.name": spec.name,
        f"{LABEL_PREFIX}.model.version": spec.version,
        f"{LABEL_PREFIX}.backend": engine.backend,
        f"{LABEL_PREFIX}.precision": _precision(spec),
        f"{LABEL_PREFIX}.spec.digest": spec.digest(),
        SBOM_LABEL: SBOM_PATH,
        **({} if spec.engines is None else {f"{LABEL_PREFIX}.engines": ",".join(spec.engines)}),
        **spec.image.labels,
    }
    wheel = f"mmaas-{metadata.version('mmaas')}-py3-none-any.whl"
    recipe = target.recipe(engine)
    pipeline = pipeline_requirements(spec.pipeline.kind if spec.pipeline else None)
    runtime_extras = (*recipe.runtime_extras, *(("signing",) if signed else ()))
    values = {
        "base_image": spec.image.base_image,
        "buildkit": buildkit,
        "ca_bundle": ca_bundle is not None,
        "phase": phase,
        "model_dir": MODEL_DIR,
        "sbom_path": SBOM_PATH,
        "entrypoint": json.dumps(list(ENTRYPOINT)),
        "engine_dir": ENGINE_DIR,
        "builder_wheel": f"/opt/mmaas/{BUILDER_WHEEL}/{wheel}[{','.join(recipe.builder_extras)}]",
        "runtime_wheel": f"/opt/mmaas/{RUNTIME_WHEEL}/{wheel}[{','.join(runtime_extras)}]",
        "env": runtime_env(spec),
        "ports": list(served_ports(spec).values()),
        "labels": labels,
        "pipeline_requirements": bool(pipeline),
        **target.template_values(engine),
    }
    generated = {
        **generated,
        CONSTRAINTS: constraints_text(),
        "requirements-builder.txt": _lines(requirements(recipe.builder_extras)),
        "requirements-runtime.txt": _lines(requirements(runtime_extras)),
        **({"requirements-pipeline.txt": pipeline} if pipeline else {}),
    }
    plan = BuildPlan(
        image=f"{spec.image_repository}:{spec.image_tag}",
        template=recipe.template,
        values=values,
        files=tuple(files),
        wheels=tuple(wheels),
        generated=generated,
        labels=labels,
    )
    return BuildPlan(**{**plan.__dict__, "digest": _digest(plan)})


def _precision(spec: ModelSpec) -> str:
    """The engines' precision (``mixed`` when they differ)."""
    if spec.engines is None:
        return spec.target_precision
    precisions = {engine.target_precision for engine in spec.engines.values()}
    return precisions.pop() if len(precisions) == 1 else "mixed"


def engine_inputs(
    spec: ModelSpec,
    source: Path,
    *,
    toolkit_dir: Path,
    external_data: Sequence[str] = (),
    model_dir: Path | None = None,
) -> tuple[ContextFile | ContextWheel, ...]:
    """What the engine compile reads, as staged: the ONNX file and its external data
    (``model/``), the gates' samples (``model/<path in the model folder>``), what
    the back end's build target adds (TensorRT: the INT8 calibration cache, where the
    compiler looks for it: beside the ONNX file) and the builder stage's mmaas wheel (the
    stage and the back end's packages of ``toolkit_dir``). Their bytes, with the engine
    request, make the engine-cache key."""
    folder = model_dir or source.parent
    samples = spec.checks.sample_files()
    target = get_target(spec.backend)
    return (
        ContextFile(source, f"model/{source.name}"),
        *(ContextFile(source.parent / name, f"model/{name}") for name in external_data),
        *(ContextFile(folder / name, f"model/{name}") for name in samples),
        *target.engine_files(spec, folder),
        ContextWheel(toolkit_dir, target.builder_packages, BUILDER_WHEEL),
    )


def compile_request(spec: ModelSpec, source: Path, out_dir: Path) -> CompileRequest:
    """The compiler's request for a completed ``spec`` whose ONNX file is ``source`` (used
    on the host by ``mmaas serve``; the image reads the same fields from the build request)."""
    return CompileRequest(
        model=model_info(spec),
        source=source,
        out_dir=out_dir,
        settings=get_target(spec.backend).engine_settings(spec),
    )


def _lines(requirements: list[str]) -> str:
    return "".join(f"{line}\n" for line in requirements)


def _digest(plan: BuildPlan) -> str:
    body = {
        "image": plan.image,
        "template": plan.template,
        "values": plan.values,
        "files": [f.target for f in plan.files],
        "wheels": [[w.target, list(w.packages)] for w in plan.wheels],
        "generated": plan.generated,
        "labels": plan.labels,
    }
    return bytes_digest(json.dumps(body, sort_keys=True, default=str).encode())
