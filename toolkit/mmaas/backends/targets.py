"""The data the build-target protocol (:class:`mmaas.backends.BuildTarget`) passes: a
model's image recipe, the compile build a target runs, and what ``mmaas doctor`` asks each
target (:meth:`~mmaas.backends.BuildTarget.readiness`): the checks it makes of this host
and whether its images can be built here, given what doctor found of Docker. Doctor
itself knows no back end by name: it asks every entry of :data:`mmaas.backends.BACKENDS`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


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
class ImageRecipe:
    """A model's Dockerfile template (``templates/``) and the mmaas extras its runtime and
    builder stages install; per spec, so a back end may choose by device or provider."""

    template: str
    runtime_extras: tuple[str, ...]
    builder_extras: tuple[str, ...]


@dataclass(frozen=True)
class CompileBuild:
    """The compile build of one model as the host pipeline hands it to a build target.
    Attributes:
        build: ``build(stage)`` runs ``docker build`` of the compile context tagged ``tag``
            (``stage`` None: the whole Dockerfile) and returns the image id.
        tag: the compile image's tag.
        docker: the Docker client's argv prefix.
        work: a scratch directory the target may write into.
    """

    build: Callable[[str | None], str]
    tag: str
    docker: list[str]
    work: Path
