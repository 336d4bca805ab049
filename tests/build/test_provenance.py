"""The host's part of the provenance record from a real git work tree
and a GitHub Actions environment; the stamp step's part is checked on a built image in
tests/export/test_deploy_image.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

from mmaas.build.provenance import git_facts, workflow_run


def git(folder: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(folder), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def test_git_facts_name_the_last_commit_of_the_model_folder_and_dirt(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "models" / "m").mkdir(parents=True)
    git(repo, "init", "-q")
    for key, value in (("user.email", "t@example.invalid"), ("user.name", "t")):
        git(repo, "config", key, value)
    (repo / "models" / "m" / "model.yaml").write_text("name: m\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "model")
    model_commit = git(repo, "rev-parse", "HEAD")
    (repo / "README.md").write_text("elsewhere\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "elsewhere")  # does not touch the model folder
    folder = repo / "models" / "m"
    assert git_facts(folder, None) == {
        "commit": model_commit,
        "source": "model folder",
        "dirty": False,
    }
    (folder / "model.yaml").write_text("name: m\nversion: '2'\n")
    assert git_facts(folder, None)["dirty"] is True
    assert git_facts(folder, "f" * 40) == {"commit": "f" * 40, "source": "revision", "dirty": True}
    assert git_facts(tmp_path / "elsewhere", None) is None  # not a git work tree


def test_workflow_run_only_under_github_actions() -> None:
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_SERVER_URL": "https://github.example",
        "GITHUB_REPOSITORY": "org/repo",
        "GITHUB_RUN_ID": "42",
        "GITHUB_RUN_ATTEMPT": "2",
        "GITHUB_WORKFLOW_REF": "org/repo/.github/workflows/models.yml@refs/heads/main",
        "GITHUB_EVENT_NAME": "push",
    }
    assert workflow_run(env) == {
        "url": "https://github.example/org/repo/actions/runs/42/attempts/2",
        "workflow_ref": "org/repo/.github/workflows/models.yml@refs/heads/main",
        "event": "push",
    }
    assert workflow_run({**env, "GITHUB_ACTIONS": "false"}) is None
    assert workflow_run({}) is None
