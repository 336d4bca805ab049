"""``mmaas ci changed|summary|local`` on real git repositories and event files."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from git_repos import ZEROS, GitRepo
from mmaas.ci.git import Git
from mmaas.ci.local import push_event
from mmaas.cli.ci import command
from mmaas.core import proc


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    made = GitRepo(tmp_path / "repo")
    made.model("a")
    made.model("b", backend="tensorrt")
    made.write(".github/mmaas-runners.json", '{"default": "ubuntu-24.04", "tensorrt": "gpu"}')
    made.commit("initial")
    return made


def run(*args: str, env: dict[str, str] | None = None):
    outcome = CliRunner().invoke(command, list(args), env=env or {"GITHUB_ACTIONS": ""})
    assert outcome.exit_code == 0, outcome.output
    return outcome


def write_event(tmp_path: Path, event: dict) -> Path:
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))
    return path


def write_push_event(tmp_path: Path, before: str, after: str, branch: str) -> Path:
    """A push event of ``branch`` from ``before`` to ``after`` on a repo whose default
    branch is main."""
    return write_event(
        tmp_path,
        {
            "before": before,
            "after": after,
            "ref": f"refs/heads/{branch}",
            "repository": {"default_branch": "main"},
        },
    )


def run_changed(event: Path, repo: GitRepo, outputs: Path | None = None, **kwargs):
    """``mmaas ci changed`` on ``event`` in ``repo``, writing GitHub outputs to ``outputs``."""
    args = ["changed", "--event", str(event), "--repo", str(repo.path)]
    if outputs is not None:
        args += ["--github-output", str(outputs)]
    return run(*args, **kwargs)


def test_changed_reads_a_push_event_and_writes_github_outputs(
    repo: GitRepo, tmp_path: Path
) -> None:
    before = repo.head()
    repo.model("b", backend="tensorrt", version="2")
    after = repo.commit()
    event = write_push_event(tmp_path, before, after, "main")
    outputs = tmp_path / "github_output"
    outcome = run_changed(event, repo, outputs)
    printed = json.loads(outcome.stdout)
    assert printed["include"] == [
        {"model": "b", "path": "models/b", "backend": "tensorrt", "runner": "gpu"}
    ]
    assert printed["since"] == before and printed["head"] == after
    lines = outputs.read_text().splitlines()
    assert lines == [
        'matrix={"include":[{"model":"b","path":"models/b","backend":"tensorrt","runner":"gpu"}]}',
        "count=1",
        "deleted=[]",
    ]


def test_changed_on_a_pull_request_diffs_from_its_base(repo: GitRepo, tmp_path: Path) -> None:
    base = repo.head()
    repo.git("checkout", "--quiet", "-b", "feature")
    repo.model("a", version="2")
    repo.commit()
    event = write_event(
        tmp_path,
        {"pull_request": {"base": {"sha": base}}, "repository": {"default_branch": "main"}},
    )
    printed = json.loads(run_changed(event, repo).stdout)
    assert [entry["model"] for entry in printed["include"]] == ["a"]


def test_changed_with_a_thin_act_event_warns_and_builds_everything_c22(
    repo: GitRepo, tmp_path: Path
) -> None:
    event = write_event(tmp_path, {"ref": "refs/heads/main"})
    outputs = tmp_path / "github_output"
    outcome = run_changed(event, repo, outputs, env={"GITHUB_ACTIONS": "true"})
    assert "::warning::the event names no base commit" in outcome.stderr
    assert "count=2" in outputs.read_text().splitlines()


def test_changed_for_a_new_branch_event_diffs_from_the_merge_base_c19(
    repo: GitRepo, tmp_path: Path
) -> None:
    repo.git("checkout", "--quiet", "-b", "feature")
    repo.write("docs/notes.md")
    after = repo.commit()
    event = write_push_event(tmp_path, ZEROS, after, "feature")
    outputs = tmp_path / "github_output"
    printed = json.loads(run_changed(event, repo, outputs).stdout)
    assert printed["include"] == [] and printed["warnings"] == []
    assert 'matrix={"include":[]}' in outputs.read_text().splitlines()


def test_changed_for_a_branch_deletion_builds_nothing(repo: GitRepo, tmp_path: Path) -> None:
    event = write_event(
        tmp_path, {"before": repo.head(), "after": ZEROS, "deleted": True, "ref": "refs/heads/gone"}
    )
    printed = json.loads(run_changed(event, repo).stdout)
    assert printed["include"] == [] and "deletes refs/heads/gone" in printed["reason"]


def test_summary_writes_one_table_row(tmp_path: Path) -> None:
    build = tmp_path / "build.json"
    build.write_text(
        json.dumps(
            {
                "image": "mmaas/a:1",
                "image_id": "sha256:" + "1" * 64,
                "engine": {"blake3": "blake3:" + "2" * 64},
                "seconds": 12.345,
            }
        )
    )
    push = tmp_path / "push.json"
    push.write_text(json.dumps({"reference": "127.0.0.1:5000/x/a@sha256:" + "3" * 64}))

    def summary(push_json: Path) -> str:
        args = ("--model", "a", "--backend", "onnxruntime", "--build", str(build))
        return run("summary", *args, "--push", str(push_json)).stdout

    table = summary(push).splitlines()
    assert table[0] == "| model | backend | engine hash | image digest | build time |"
    assert table[2] == (
        f"| a | onnxruntime | `blake3:{'2' * 64}` | "
        f"`127.0.0.1:5000/x/a@sha256:{'3' * 64}` | 12.3 s |"
    )
    unpushed = summary(tmp_path / "absent.json")
    assert "not pushed (local `mmaas/a:1`" in unpushed


def test_local_dry_run_maps_every_runner_label_and_keeps_secrets_off_argv(
    repo: GitRepo, monkeypatch
) -> None:
    monkeypatch.chdir(repo.path)
    workflow = repo.path / ".github" / "workflows" / "models.yml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text("on: push\n")
    env = {"MMAAS_REGISTRY_USER": "me", "MMAAS_REGISTRY_PASSWORD": "s3cret-value"}
    outcome = run(
        "local", "--registry", "127.0.0.1:5000/e2e", "--base", "HEAD", "--dry-run", env=env
    )
    argv = shlex.split(outcome.stdout)
    assert argv[1:4] == ["push", "--workflows", str(workflow.resolve())]
    assert argv[4] == "--eventpath" and argv[5].endswith("event.json")
    assert "MMAAS_REGISTRY=127.0.0.1:5000/e2e" in argv
    platforms = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--platform"]
    assert platforms == ["ubuntu-24.04=-self-hosted", "gpu=-self-hosted"]
    assert "--secret-file" in argv
    assert "s3cret-value" not in outcome.output


def test_local_push_event_names_both_commits_or_leaves_before_out(repo: GitRepo) -> None:
    first = repo.head()
    repo.model("a", version="2")
    second = repo.commit()
    event = push_event(Git(repo.path), "HEAD~1", "HEAD")
    assert event == {
        "before": first,
        "after": second,
        "ref": "refs/heads/main",
        "repository": {"default_branch": "main"},
    }
    assert "before" not in push_event(Git(repo.path), "HEAD~5", "HEAD")


# What `mmaas ci changed` must not import: CI's change detection installs only the `ci`
# extra (.github/actions/setup-mmaas), so these are absent there.
NOT_IN_THE_CI_EXTRA = ("onnx", "jinja2", "grpc", "tritonclient", "rich")
DRIVER = """
import json, sys
from mmaas.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
heavy = [name for name in {names!r} if name in sys.modules]
sys.stderr.write("imported: " + json.dumps(heavy) + "\\n")
sys.exit(code)
"""


def changed_in_a_subprocess(repo: GitRepo, event: Path, outputs: Path):
    driver = DRIVER.format(names=NOT_IN_THE_CI_EXTRA)
    args = ["ci", "changed", "--event", str(event), "--repo", str(repo.path)]
    return proc.run(
        [sys.executable, "-c", driver, *args, "--github-output", str(outputs)],
        env={"GITHUB_ACTIONS": ""},
        check=False,
    )


def test_a_push_of_300_plus_files_and_one_model_change_builds_that_model(
    repo: GitRepo, tmp_path: Path
) -> None:
    """GitHub's `paths` filters see the first 300 changed files only; the
    models workflow has none, and change detection counts every file of the push."""
    before = repo.head()
    for index in range(350):
        repo.write(f"docs/generated/page-{index:03}.md", f"page {index}\n")
    repo.model("a", version="2.0.0")  # one model change, sorted after 350 docs files
    after = repo.commit("regenerate the docs, bump model a")
    assert len(repo.git("diff", "--name-only", before, after).splitlines()) == 352
    outputs = tmp_path / "github_output"
    done = changed_in_a_subprocess(repo, write_push_event(tmp_path, before, after, "main"), outputs)
    assert done.returncode == 0, done.stderr
    assert [entry["model"] for entry in json.loads(done.stdout)["include"]] == ["a"]
    assert "count=1\n" in outputs.read_text()
    assert "imported: []" in done.stderr  # the ci extra is enough


def test_a_large_push_without_model_changes_gives_an_empty_matrix(
    repo: GitRepo, tmp_path: Path
) -> None:
    before = repo.head()
    for index in range(320):
        repo.write(f"docs/page-{index:03}.md", f"page {index}\n")
    after = repo.commit("docs only")
    outputs = tmp_path / "github_output"
    done = changed_in_a_subprocess(repo, write_push_event(tmp_path, before, after, "main"), outputs)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["include"] == []
    lines = outputs.read_text().splitlines()
    assert 'matrix={"include":[]}' in lines and "count=0" in lines  # the build job is skipped


def test_extra_requirements_expands_the_ci_extra_from_pyproject() -> None:
    from scripts.extra_requirements import requirements

    found = requirements(["ci"])
    assert found[:2] == ["numpy>=1.26", "blake3>=0.4"]  # the base distribution
    assert "onnxruntime>=1.18" in found and "click>=8.1" in found  # mmaas[onnxruntime]
    assert not any(line.startswith(("mmaas", "onnx>", "jinja2", "grpcio")) for line in found)


def test_every_verb_of_the_table_loads_with_its_own_command() -> None:
    from mmaas.cli import VERBS, cli

    for verb in VERBS:
        loaded = cli.get_command(None, verb)  # type: ignore[arg-type]
        assert loaded is not None and loaded.name == verb
    assert cli.get_command(None, "nope") is None  # type: ignore[arg-type]
