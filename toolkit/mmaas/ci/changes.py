"""Which models a push or pull request changed: the set CI builds, as a GitHub Actions matrix.

A model is a folder ``models/<name>/`` holding ``model.yaml``. A model is rebuilt when a
file under its folder changed, and every model is rebuilt when a shared build input
(:data:`SHARED_INPUTS`) changed. Changes are always the difference of two *trees*
(``git diff FROM HEAD``), never one commit's own file list, so merge commits count every
change they bring in (C21). Where the push event's ``before`` commit cannot be used (C19
new branch, force push, shallow clone, C22 events without ``before``) the merge-base
stands in, and when there is none every model is built, with a warning saying why.
Deleted models are listed, never built (C20); a renamed folder is built under its new
name and its old name is listed as deleted. A new model whose local ONNX source is not
in the commit (git-ignored) is warned about: CI could never build it
(:mod:`mmaas.ci.sources`).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from mmaas.ci.git import Git
from mmaas.ci.runners import RunnerLabel, load_runners, runner_for
from mmaas.ci.sources import missing_sources
from mmaas.core.errors import SpecError, SpecProblem, UsageError
from mmaas.spec.model import NAME_PATTERN, ModelSpec

MODELS_DIR = "models"
SPEC_FILE = "model.yaml"
# Build inputs of every image: a change under one of these rebuilds all models. The models
# workflow starts on every push and leaves the choice to this module (GitHub's `paths:`
# filters see only the first 300 changed files of a push).
SHARED_INPUTS = ("toolkit/", "templates/", "dockerfiles/", "pyproject.toml", "setup.py")
DEFAULT_BACKEND: str = ModelSpec.model_fields["backend"].default


@dataclass(frozen=True)
class ModelBuild:
    """One entry of the build matrix (GitHub Actions ``strategy.matrix.include``).

    Attributes:
        model: the folder name under ``models/``.
        path: ``models/<name>`` relative to the repository root.
        backend: ``backend`` from its model.yaml (``onnxruntime`` when absent).
        runner: the ``runs-on`` label (or label list) for that backend, from the runners
            config (:mod:`mmaas.ci.runners`).
    """

    model: str
    path: str
    backend: str
    runner: RunnerLabel


@dataclass(frozen=True)
class ChangeSet:
    """The models to build for one push or pull request.

    Attributes:
        include: the models to build, sorted by name.
        deleted: names of model folders removed (or renamed away) by the change.
        reason: one line saying what was compared (or why everything is built).
        warnings: conditions the user should see (unusable ``before``, missing fields).
        since: the commit diffed from; None when every model is built without a diff.
        head: the commit built.
    """

    include: tuple[ModelBuild, ...]
    deleted: tuple[str, ...]
    reason: str
    warnings: tuple[str, ...]
    since: str | None
    head: str

    def matrix(self) -> dict[str, list[dict[str, object]]]:
        """``{"include": [{"model", "path", "backend", "runner"}, ...]}`` for
        ``strategy.matrix: ${{ fromJSON(...) }}`` (empty list: skip the build job)."""
        return {"include": [asdict(build) for build in self.include]}

    def to_json(self) -> dict[str, object]:
        """The matrix plus ``deleted``, ``reason``, ``warnings``, ``since`` and ``head``."""
        return {
            **self.matrix(),
            "deleted": list(self.deleted),
            "reason": self.reason,
            "warnings": list(self.warnings),
            "since": self.since,
            "head": self.head,
        }


def changed_models(
    repo: Path, base: str | None, head: str, default_branch: str = "main", *, ref: str | None = None
) -> ChangeSet:
    """The models changed between ``base`` and ``head`` in the git repository ``repo``.

    Args:
        repo: a git work tree or repository (the CI checkout, with history: fetch-depth 0).
        base: the push event's ``before`` (a commit or ref), forty zeros for a new branch,
            or None when the event has none (act's thin events, workflow_dispatch).
        head: the commit built (the event's ``after``, or ``HEAD``).
        default_branch: the repository's default branch (event ``repository.default_branch``);
            looked up as ``origin/<name>`` first, then the local branch.
        ref: the pushed ref (``refs/heads/main``); a new-branch push of the default branch
            itself builds every model.

    Raises:
        UsageError: ``repo`` is not a git repository or ``head`` names no commit.
        SpecError: a changed model's model.yaml is not YAML or its runners config is invalid.
    """
    git = Git(repo)
    head_commit = git.commit(head)
    if head_commit is None:
        raise UsageError(
            f"{repo}: head {head!r} names no commit in this repository",
            hint="pass --head with a commit that is checked out (e.g. HEAD)",
        )
    since, reason, warnings = _comparison_point(git, base, head_commit, default_branch, ref)
    current = _models_at(git, head_commit)
    if since is None:
        return _change_set(git, head_commit, sorted(current), (), reason, warnings, None)
    paths = git.changed_paths(since, head_commit)
    touched = {
        parts[1]
        for parts in (p.split("/") for p in paths)
        if len(parts) > 2 and parts[0] == MODELS_DIR
    }
    before = _models_at(git, since)
    deleted = sorted(touched.intersection(before).difference(current))
    added = {name: current[name] for name in current if name not in before}
    warnings = (*warnings, *missing_sources(git, head_commit, added))
    shared = next((p for p in paths if p.startswith(SHARED_INPUTS)), None)
    if shared is not None:
        reason = f"{reason}; {shared} is a shared build input, so every model is built"
        return _change_set(git, head_commit, sorted(current), deleted, reason, warnings, since)
    return _change_set(
        git, head_commit, sorted(touched.intersection(current)), deleted, reason, warnings, since
    )


def _comparison_point(
    git: Git, base: str | None, head: str, default_branch: str, ref: str | None
) -> tuple[str | None, str, tuple[str, ...]]:
    """(commit to diff from or None for all models, reason, warnings)."""
    if not base:
        message = "the event names no base commit ('before' missing); building every model"
        return None, "no base commit", (message,)
    if set(base) == {"0"}:
        return _new_branch(git, head, default_branch, ref)
    base_commit = git.commit(base)
    if base_commit is None:
        return _from_default_branch(
            git,
            head,
            default_branch,
            f"base {base[:12]} is not in this clone (force push, or a shallow checkout)",
        )
    if git.is_ancestor(base_commit, head):
        return base_commit, f"changes {base_commit[:12]}..{head[:12]}", ()
    fork = git.merge_base(base_commit, head)
    if fork is None:
        return (
            None,
            "force push to unrelated history",
            (f"base {base_commit[:12]} shares no history with {head[:12]}; building every model",),
        )
    return (
        fork,
        f"changes {fork[:12]}..{head[:12]} (merge-base after a force push)",
        (
            f"base {base_commit[:12]} is not an ancestor of {head[:12]} (force push); "
            f"diffing from their merge-base {fork[:12]}",
        ),
    )


def _new_branch(
    git: Git, head: str, default_branch: str, ref: str | None
) -> tuple[str | None, str, tuple[str, ...]]:
    """C19: ``before`` is all zeros. Diff from the merge-base with the default branch."""
    if ref == f"refs/heads/{default_branch}":
        return None, f"first push of the default branch {default_branch}", ()
    tip = git.branch_tip(default_branch)
    fork = git.merge_base(tip, head) if tip else None
    if fork is None:
        return (
            None,
            "new branch",
            (
                f"new branch and no merge-base with {default_branch!r} in this clone; "
                "building every model",
            ),
        )
    return fork, f"new branch: changes since its merge-base {fork[:12]} with {default_branch}", ()


def _from_default_branch(
    git: Git, head: str, default_branch: str, problem: str
) -> tuple[str | None, str, tuple[str, ...]]:
    """The base is unusable: diff from the merge-base with the default branch when it is
    not ``head`` itself (which would hide every change), else build every model."""
    tip = git.branch_tip(default_branch)
    fork = git.merge_base(tip, head) if tip else None
    if fork is None or fork == head:
        return (
            None,
            problem,
            (f"{problem}; no usable merge-base with {default_branch!r}: building every model",),
        )
    return (
        fork,
        f"changes since the merge-base {fork[:12]} with {default_branch}",
        (f"{problem}; diffing from the merge-base {fork[:12]} with {default_branch}",),
    )


def _models_at(git: Git, commit: str) -> dict[str, str]:
    """``{name: "models/<name>/model.yaml"}`` for every model in ``commit``'s tree."""
    found: dict[str, str] = {}
    for path in git.files(commit, MODELS_DIR):
        parts = path.split("/")
        if len(parts) == 3 and parts[2] == SPEC_FILE:
            if not re.match(NAME_PATTERN, parts[1]):
                raise SpecError(
                    [
                        SpecProblem(
                            path,
                            "",
                            f"model folder {parts[1]!r} is not a "
                            f"valid model name ({NAME_PATTERN}); rename it",
                        )
                    ]
                )
            found[parts[1]] = path
    return found


def _change_set(
    git: Git,
    head: str,
    names: list[str],
    deleted: list[str] | tuple[()],
    reason: str,
    warnings: tuple[str, ...],
    since: str | None,
) -> ChangeSet:
    runners = load_runners(git, head)
    builds = []
    for name in names:
        backend = _backend(git, head, f"{MODELS_DIR}/{name}/{SPEC_FILE}")
        builds.append(
            ModelBuild(name, f"{MODELS_DIR}/{name}", backend, runner_for(runners, backend))
        )
    return ChangeSet(tuple(builds), tuple(deleted), reason, warnings, since, head)


def _backend(git: Git, commit: str, spec_path: str) -> str:
    """``backend`` of the model.yaml at ``spec_path`` in ``commit`` (the one key CI needs;
    the full spec is validated by the build itself): the top-level key, or with
    ``engines:`` the first engine's (every engine of a model shares one back end)."""
    try:
        data = yaml.safe_load(git.show(commit, spec_path) or "")
    except yaml.YAMLError as exc:
        problem = SpecProblem(spec_path, "", f"not valid YAML ({exc}); fix the file")
        raise SpecError([problem]) from exc
    if not isinstance(data, dict):
        raise SpecError([SpecProblem(spec_path, "", "not a YAML mapping; fix the file")])
    key, engines = "backend", data.get("engines")
    if isinstance(engines, dict) and engines and isinstance(next(iter(engines.values())), dict):
        name, first = next(iter(engines.items()))
        key, data = f"engines.{name}.backend", first
    backend = data.get("backend", DEFAULT_BACKEND)
    if not isinstance(backend, str):
        raise SpecError(
            [SpecProblem(spec_path, key, "must be a string such as onnxruntime or tensorrt")]
        )
    return backend
