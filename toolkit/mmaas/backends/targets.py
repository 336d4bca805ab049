"""The host side of a back end: the build-target protocol (:class:`BuildTarget`, each back
end's host part) and the data it passes: the image recipe, the compile build ``mmaas build``
hands it (:class:`CompileBuild`, through which it reaches Docker), the files it adds to a
build context, the commands ``mmaas render`` prints, and what ``mmaas doctor`` asks each
target (:meth:`BuildTarget.readiness`): the checks it makes of this host and whether its
images can be built here, given what doctor found of Docker. Doctor itself knows no back
end by name: it asks every entry of :data:`mmaas.backends.BACKENDS`.

Host side only: ``mmaas.build`` imports this module and the host parts; neither imports
``mmaas.build`` (pyproject.toml's import contracts).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from mmaas.core.manifest import Manifest

if TYPE_CHECKING:  # the spec's type (the protocol's signatures only)
    from mmaas.spec.model import ModelSpec

ENGINE_DIR = "/opt/mmaas/engine"  # the builder stage's compiled (or cached) engine directory
ENGINE_CONTEXT = "engine"  # the package build's engine directory in its build context


@dataclass(frozen=True)
class ContextFile:
    """A host file (or directory) copied into the staged build context at ``target``."""

    source: Path
    target: str


@dataclass(frozen=True)
class ImageRecipe:
    """A model's Dockerfile template (``templates/``) and the mmaas extras its runtime and
    builder stages install; per spec, so a back end may choose by device or provider."""

    template: str
    runtime_extras: tuple[str, ...]
    builder_extras: tuple[str, ...]


@dataclass(frozen=True)
class CompileBuild:
    """The compile build of one model as the host pipeline hands it to a build target: the
    target reaches Docker only through it.
    Attributes:
        build: ``build(stage)`` runs ``docker build`` of the compile context tagged ``tag``
            (``stage`` None: the whole Dockerfile) and returns the image id.
        tag: the compile image's tag.
        docker: the Docker client's argv prefix.
        work: a scratch directory the target may write into.
        copy_out: ``copy_out(source, dest)`` copies the directory ``source`` out of the
            image tagged ``tag`` (without running it) to ``dest`` and returns ``dest``;
            DockerError when the image has no ``source``.
        remove_image: ``remove_image(image)`` removes a local image (tag or id); a missing
            one is not an error.
    """

    build: Callable[[str | None], str]
    tag: str
    docker: list[str]
    work: Path
    copy_out: Callable[[str, Path], Path]
    remove_image: Callable[[str], None]


@dataclass(frozen=True)
class HostCheck:
    """One finding of ``mmaas doctor``: ``name``, whether it is ``ok``, and the ``detail``
    that says why (what was found, or what is missing and how to get it)."""

    name: str
    ok: bool
    detail: str

    @property
    def summary(self) -> str:
        """``name: first line of detail``, for a back end's one-line reason."""
        return f"{self.name}: {self.detail.splitlines()[0] if self.detail else ''}"


@dataclass(frozen=True)
class DockerHost:
    """What ``mmaas doctor`` found of Docker before asking the back ends: the ``docker``
    and ``buildkit`` checks and ``docker info``'s JSON (``{}`` without an engine)."""

    docker: HostCheck
    buildkit: HostCheck
    info: Mapping[str, Any]


@dataclass(frozen=True)
class Readiness:
    """Whether a back end can build images on this host: its own ``checks`` (beyond
    Docker's), ``usable`` and the one-line ``reason``."""

    checks: tuple[HostCheck, ...]
    usable: bool
    reason: str


@dataclass(frozen=True)
class BuildCommand:
    """One command of what ``mmaas build`` runs, as ``mmaas render`` prints it: ``what``
    it does, its ``argv`` with real paths, and ``env`` set for it (``DOCKER_BUILDKIT``)."""

    what: str
    argv: list[str]
    env: Mapping[str, str] = field(default_factory=dict)

    def shell(self) -> str:
        """The command as one shell line, ready to paste: ``NAME=value argv...`` quoted."""
        return shlex.join([*(f"{k}={v}" for k, v in self.env.items()), *self.argv])


class BuildTarget(Protocol):
    """The host side of a back end: how ``mmaas build`` makes its image.

    Attributes:
        name: the registry name.
        precisions: the ``target_precision`` values it builds.
        runs_on_gpu: its images are built and served on a GPU (CI runner choice).
        runtime_packages, builder_packages: the mmaas subpackages each image's wheel holds.
    """

    name: str
    precisions: tuple[str, ...]
    runs_on_gpu: bool
    runtime_packages: tuple[str, ...]
    builder_packages: tuple[str, ...]

    def recipe(self, spec: ModelSpec) -> ImageRecipe:
        """The template and the per-stage extras of ``spec``'s image."""
        ...

    def check_input(self, name: str) -> str | None:
        """Why this back end cannot take an input called ``name`` (e.g. a name trtexec
        cannot quote), or None; spec validation reports it at the input's key."""
        ...

    def check_spec(self, spec: ModelSpec) -> list[tuple[tuple[str | int, ...], str]]:
        """Settings of a completed ``spec`` this back end cannot build or run together
        (e.g. a precision its device lacks), as ``(key path, message)``; spec validation
        reports every one at its key."""
        ...

    def check_datatype(self, spec: ModelSpec, datatype: str) -> str | None:
        """Why this back end (at ``spec``'s settings, e.g. its TensorRT release) cannot
        carry a tensor of KServe v2 ``datatype`` in or out of an engine, or None; spec
        validation reports it at the tensor, naming it."""
        ...

    def engine_settings(self, spec: ModelSpec) -> Any:
        """The typed engine settings of ``spec`` (a frozen dataclass the compiler reads
        back): only what changes the engine."""
        ...

    def builder_image(self, spec: ModelSpec) -> str:
        """The image the builder stage starts from."""
        ...

    def pin(self, spec: ModelSpec) -> dict[str, str]:
        """``{"name", "version"}`` of the back end the builder stage runs."""
        ...

    def hardware_class(self, spec: ModelSpec) -> dict[str, Any]:
        """The class of machine an engine built here is tied to (for the engine-cache key)."""
        ...

    def template_values(self, spec: ModelSpec) -> dict[str, Any]:
        """Template values beyond the common ones. Raises SpecError for settings the
        target cannot build."""
        ...

    def engine_files(self, spec: ModelSpec, folder: Path) -> tuple[ContextFile, ...]:
        """Files of the model folder the compile reads beyond the ONNX file and samples."""
        ...

    def preflight(self, spec: ModelSpec, image: str) -> str | None:
        """Checks before any Docker work (a GPU); an extra image tag or None. BuildError."""
        ...

    def compile_engine(self, build: CompileBuild) -> Path:
        """Run the compile route and return the engine directory it wrote (unverified)."""
        ...

    def labels(self, manifest: Manifest) -> dict[str, str]:
        """Image labels from the built engine's manifest beyond the common ones."""
        ...

    def readiness(self, host: DockerHost) -> Readiness:
        """Its own checks of this host and whether its images build here (``doctor``)."""
        ...

    def engine_command(self, spec: ModelSpec, source: Path, spec_file: str) -> list[str] | None:
        """The compile's command as the builder stage runs it (TensorRT: trtexec's argv
        for ``spec``'s pinned release), or None for a library call. SpecError: what the
        release refuses, each problem in ``spec_file`` at its key path."""
        ...

    def build_commands(
        self,
        spec: ModelSpec,
        docker: list[str],
        build_args: Callable[[Path, str, str | None], list[str]],
        contexts: tuple[Path, Path],
        image: str,
        env: Mapping[str, str],
    ) -> list[BuildCommand]:
        """What ``mmaas build`` runs, in order (``env`` is each ``docker build``'s)."""
        ...
