"""The provenance record of a build: where an image's engine came from.

:func:`host_provenance` collects, on the host, what the image cannot know; the package
build's stamp step (:func:`mmaas.stage.stamp.stamp_model_dir`) completes it with what the
engine's own manifest knows and writes it into the manifest as ``build.provenance``, so
``manifest_digest`` (and with it the signature, :mod:`mmaas.core.signing`) covers it:

* ``git``: ``commit`` -- ``--revision`` when given (CI passes ``$GITHUB_SHA``), else the
  last commit that touched the model folder (``git log -1 -- MODEL``: a commit elsewhere
  in the repository does not make an unchanged model's image stale); ``source``
  (``revision`` or ``model folder``); ``dirty``: the model folder has uncommitted changes.
  None outside a git work tree.
* ``workflow_run``: under GitHub Actions (``GITHUB_ACTIONS=true``, act included) the run's
  URL (``$GITHUB_SERVER_URL/$GITHUB_REPOSITORY/actions/runs/$GITHUB_RUN_ID/attempts/
  $GITHUB_RUN_ATTEMPT``), ``workflow_ref`` and ``event``; else None.
* ``builder_images``: per engine, the image its builder stage started from
  (``reference``) and its content digest (``content``,
  :func:`mmaas.build.cache.key.image_content`: the engine cache key covers it, so a
  cached engine was compiled on the same content).
* ``engines``, added by the stamp step: per engine, ``command`` (the trtexec argv, or ONNX
  Runtime's options, as the compile ran them), ``source`` (the ONNX file's path, blake3,
  sha256 and size) and ``engine_key``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mmaas.build import docker as docker_engine
from mmaas.build.cache.key import builder_image, image_content
from mmaas.core import proc
from mmaas.core.errors import DockerError, ProcessError
from mmaas.spec.model import ModelSpec


def host_provenance(
    engines: Mapping[str, ModelSpec],
    model_dir: Path,
    revision: str | None,
    env: Mapping[str, str] = os.environ,
) -> dict[str, Any]:
    """``{"git", "workflow_run", "builder_images"}`` of a build from ``model_dir`` of the
    engine views ``engines`` (by engine name; ``builder_images`` has one entry each: see
    the module doc). Never raises: a fact that cannot be known is None.
    """
    return {
        "git": git_facts(model_dir, revision),
        "workflow_run": workflow_run(env),
        "builder_images": {name: _builder_image(spec) for name, spec in engines.items()},
    }


def git_facts(model_dir: Path, revision: str | None) -> dict[str, Any] | None:
    """``{"commit", "source", "dirty"}`` of ``model_dir``, or None outside a git work tree
    (or without git)."""
    try:
        log = _git(model_dir, "log", "-1", "--format=%H", "--", ".")
        status = _git(model_dir, "status", "--porcelain", "--", ".")
    except (ProcessError, OSError):
        return None
    if revision:
        return {"commit": revision, "source": "revision", "dirty": bool(status.strip())}
    commit = log.strip() or None
    return {"commit": commit, "source": "model folder", "dirty": bool(status.strip())}


def workflow_run(env: Mapping[str, str]) -> dict[str, str] | None:
    """The GitHub Actions run this build runs in (see the module doc), or None."""
    if env.get("GITHUB_ACTIONS") != "true" or not env.get("GITHUB_RUN_ID"):
        return None
    url = (
        f"{env.get('GITHUB_SERVER_URL', '')}/{env.get('GITHUB_REPOSITORY', '')}"
        f"/actions/runs/{env['GITHUB_RUN_ID']}/attempts/{env.get('GITHUB_RUN_ATTEMPT', '1')}"
    )
    return {
        "url": url,
        "workflow_ref": env.get("GITHUB_WORKFLOW_REF", ""),
        "event": env.get("GITHUB_EVENT_NAME", ""),
    }


def _builder_image(spec: ModelSpec) -> dict[str, str | None]:
    reference = builder_image(spec)
    try:
        content: str | None = image_content(docker_engine.inspect_image(reference))
    except DockerError:
        content = None
    return {"reference": reference, "content": content}


def _git(folder: Path, *args: str) -> str:
    return proc.run(["git", "-C", str(folder), *args], what="git").stdout
