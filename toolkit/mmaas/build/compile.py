"""The compile build of one engine: its plan, staged and built through the back end's
compile route (:meth:`mmaas.backends.targets.BuildTarget.compile_engine`), and the engine directory
it wrote, verified; :func:`docker_build` stages and builds any plan (the package build's
too)."""

from __future__ import annotations

import secrets
from pathlib import Path

from mmaas.backends import get_target
from mmaas.backends.targets import CompileBuild
from mmaas.build import docker as docker_engine
from mmaas.build.cache.key import builder_image
from mmaas.build.cache.registry import remove_image
from mmaas.build.context import ca_bundle_of, compile_plan, stage_context
from mmaas.build.plan import BuildPlan
from mmaas.core.errors import DockerError
from mmaas.core.model_dir import verify_engine_dir
from mmaas.spec.load import EngineSource, LoadedSpec


def compile_engine(
    loaded: LoadedSpec,
    engine: EngineSource,
    key: str | None,
    work: Path,
    ca_bundle: Path | None = None,
) -> Path:
    """Run the compile build of ``engine`` through its back end's compile route
    (:meth:`mmaas.backends.targets.BuildTarget.compile_engine`) and return the verified engine
    directory it wrote under ``work``.

    Raises:
        DockerError: the build failed (a failed gate or profile check names itself in the
            build output). BuildError: the GPU compile container failed. IntegrityError:
            the engine directory does not verify.
    """
    buildkit = docker_engine.client().buildkit
    plan = compile_plan(loaded, engine, key, ca_bundle or ca_bundle_of(loaded), buildkit)
    tag = f"{loaded.spec.image_repository}:engine-{secrets.token_hex(6)}"
    build = CompileBuild(
        build=lambda stage: docker_build(plan, work / "compile", tag, stage),
        tag=tag,
        docker=docker_engine.client().argv(),
        work=work,
        copy_out=lambda source, dest: docker_engine.copy_from_image(tag, source, dest),
        remove_image=remove_image,
    )
    try:
        engine_dir = get_target(engine.spec.backend).compile_engine(build)
    except DockerError as exc:
        if key is None and exc.hint is None:  # no local base image: the build had to pull it
            exc.hint = (
                f"{builder_image(engine.spec)} (image.base_image in {loaded.path}) is not in "
                "the local Docker engine: make it (scripts/make_base_image.sh), pull it, or "
                "name a local image there"
            )
        raise
    finally:
        remove_image(tag)  # also when interrupted: no compile image stays tagged
    verify_engine_dir(engine_dir)
    return engine_dir


def docker_build(plan: BuildPlan, context: Path, tag: str, target: str | None = None) -> str:
    """Stage ``plan``'s context in the new directory ``context`` and ``docker build`` it as
    ``tag`` (``target``: that stage only); return the image id.

    Raises:
        DockerError: the build failed (its output tail in the message).
    """
    context.mkdir()
    return docker_engine.build(context, stage_context(plan, context), tag, target=target)
