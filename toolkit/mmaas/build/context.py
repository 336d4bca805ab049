"""The build plans of a loaded model and their staged contexts: one compile plan per engine
(:func:`mmaas.build.plan.make_plan` of its engine view) and the package plan around the
engine directories and assets, laid out under ``engine/`` as the model directory will be
(one engine at the top, several in one folder each, assets under ``assets/``)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mmaas
from mmaas.backends.targets import ENGINE_CONTEXT, ContextFile
from mmaas.build import docker as docker_engine
from mmaas.build.plan import BuildPlan, make_package_plan, make_plan
from mmaas.build.render import render_dockerfile
from mmaas.build.requests import model_request
from mmaas.build.spec_checks import host_checks
from mmaas.build.wheel import pack_wheel
from mmaas.core.files import atomic_write_text, link_or_copy
from mmaas.spec.composition import asset_target
from mmaas.spec.load import EngineSource, LoadedSpec, load_spec
from mmaas.spec.onnx_graph import external_data_files

TOOLKIT_DIR = Path(mmaas.__file__).resolve().parent
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc")


def plan_builds(
    model: Path, *, ca_bundle: Path | None = None, buildkit: bool | None = None
) -> tuple[LoadedSpec, dict[str, BuildPlan], BuildPlan]:
    """Load ``model`` (folder or model.yaml) and plan its builds: each engine's compile
    build (by engine name) and the package build, whose engine directories are planned at
    their context paths (``engine``, ``engine/<engine>``: rendering needs only the
    paths). ``buildkit`` None asks the Docker client; ``ca_bundle`` overrides
    ``image.ca_bundle`` and ``MMAAS_CA_BUNDLE``.

    Raises:
        SpecError: the spec is invalid. DockerError: ``buildkit`` is None and no engine.
    """
    loaded = load_spec(model, checks=host_checks())
    if buildkit is None:
        buildkit = docker_engine.client().buildkit
    bundle = ca_bundle or ca_bundle_of(loaded)
    compiles = {e.name: compile_plan(loaded, e, None, bundle, buildkit) for e in loaded.engines}
    folders = {e.name: Path(engine_target(loaded, e.name)) for e in loaded.engines}
    return loaded, compiles, package_plan(loaded, {}, folders, bundle, buildkit)


def stage_context(plan: BuildPlan, context: Path) -> Path:
    """Fill the empty directory ``context`` with only this model's build inputs (C14);
    return the Dockerfile's path. Files are hard-linked when possible."""
    for item in plan.files:
        target = context / item.target
        target.parent.mkdir(parents=True, exist_ok=True)
        if item.source.is_dir():
            shutil.copytree(item.source, target, ignore=IGNORED, copy_function=link_or_copy)
        else:
            link_or_copy(item.source, target)
    for wheel in plan.wheels:
        pack_wheel(wheel.packages, context / wheel.target, wheel.root)
    for name, text in plan.generated.items():
        atomic_write_text(context / name, text)
    dockerfile = context / "Dockerfile"
    atomic_write_text(dockerfile, render_dockerfile(plan))
    return dockerfile


def compile_plan(
    loaded: LoadedSpec,
    engine: EngineSource,
    key: str | None,
    ca_bundle: Path | None,
    buildkit: bool,
) -> BuildPlan:
    """The compile plan of ``engine`` of ``loaded`` (its ONNX file's external data staged
    beside it; ``key``: its engine-cache key or None; ``ca_bundle``: a PEM bundle pip
    trusts in the build, or None).

    Raises:
        SpecError: the back end's build target cannot build a setting of the engine.
    """
    return make_plan(
        engine.spec,
        engine.source_path,
        toolkit_dir=TOOLKIT_DIR,
        buildkit=buildkit,
        ca_bundle=ca_bundle,
        model_dir=loaded.model_dir,
        external_data=external_data_files(engine.source_path),
        engine_key=key,
    )


def package_plan(
    loaded: LoadedSpec,
    keys: Mapping[str, str | None],
    engine_dirs: Mapping[str, Path],
    ca_bundle: Path | None,
    buildkit: bool,
    signed: bool = False,
    provenance: Mapping[str, Any] | None = None,
) -> BuildPlan:
    """The package plan around ``engine_dirs`` (by engine name) and the assets, staged as
    the model directory will be laid out; ``signed``: the image will be signed;
    ``provenance``: the host's part of the provenance record the stamp step writes."""
    tree = [ContextFile(engine_dirs[e.name], engine_target(loaded, e.name)) for e in loaded.engines]
    tree += [
        ContextFile(path, f"{ENGINE_CONTEXT}/{asset_target(loaded.model_dir, path)}")
        for path in loaded.assets.values()
    ]
    return make_package_plan(
        loaded.spec,
        loaded.engines[0].spec,
        model_request(loaded, keys, provenance),
        tree,
        toolkit_dir=TOOLKIT_DIR,
        buildkit=buildkit,
        ca_bundle=ca_bundle,
        signed=signed,
    )


def engine_target(loaded: LoadedSpec, name: str) -> str:
    """The context path of engine ``name``'s directory in the package build."""
    folder = loaded.engine_folder(name)
    return ENGINE_CONTEXT if folder == "." else f"{ENGINE_CONTEXT}/{folder}"


def ca_bundle_of(loaded: LoadedSpec) -> Path | None:
    """The CA bundle the build's pip trusts: ``image.ca_bundle`` (relative to the model
    folder), else ``MMAAS_CA_BUNDLE``; None when neither is set."""
    configured = loaded.spec.image.ca_bundle or os.environ.get("MMAAS_CA_BUNDLE")
    return None if not configured else (loaded.model_dir / configured).resolve()
