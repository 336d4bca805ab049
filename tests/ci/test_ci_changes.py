"""Change detection on real git repositories made in the test (C19-C22)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from git_repos import ZEROS, GitRepo
from mmaas.ci.changes import SHARED_INPUTS, changed_models
from mmaas.core.errors import SpecError, UsageError


def names(result) -> list[str]:
    return [build.model for build in result.include]


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    """main with models a, b and c (all onnxruntime), a README and a toolkit file."""
    made = GitRepo(tmp_path / "repo")
    for name in ("a", "b", "c"):
        made.model(name)
    made.write("README.md")
    made.write("toolkit/mmaas/__init__.py")
    made.commit("initial")
    return made


def test_a_push_changing_one_model_builds_exactly_that_model(repo: GitRepo) -> None:
    before = repo.head()
    repo.model("b", version="1.1.0")
    after = repo.commit()
    result = changed_models(repo.path, before, after)
    assert result.matrix() == {
        "include": [
            {"model": "b", "path": "models/b", "backend": "onnxruntime", "runner": "ubuntu-24.04"}
        ]
    }
    assert result.deleted == () and result.warnings == ()
    assert (result.since, result.head) == (before, after)


def test_a_push_touching_nothing_under_models_gives_an_empty_matrix(repo: GitRepo) -> None:
    before = repo.head()
    repo.write("README.md", "more docs\n")
    repo.write("models/README.md", "how to add a model\n")  # not inside a model folder
    result = changed_models(repo.path, before, repo.commit())
    assert result.matrix() == {"include": []}
    assert result.deleted == ()


def test_a_folder_without_model_yaml_is_not_a_model(repo: GitRepo) -> None:
    before = repo.head()
    repo.write("models/scratch/notes.txt")
    assert names(changed_models(repo.path, before, repo.commit())) == []


@pytest.mark.parametrize(
    "path",
    [
        "toolkit/mmaas/plan.py",
        "templates/Dockerfile.j2",
        "dockerfiles/base.Dockerfile",
        "pyproject.toml",
    ],
)
def test_a_shared_build_input_rebuilds_every_model(repo: GitRepo, path: str) -> None:
    assert path.startswith(SHARED_INPUTS)
    before = repo.head()
    repo.write(path, "changed\n")
    result = changed_models(repo.path, before, repo.commit())
    assert names(result) == ["a", "b", "c"]
    assert path in result.reason


def test_merge_commit_counts_every_change_it_brings_in_c21(repo: GitRepo) -> None:
    fork = repo.head()
    repo.model("a", version="2.0.0")
    before = repo.commit("a changes on main (built by an earlier push)")
    repo.git("checkout", "--quiet", "-b", "feature", fork)
    repo.model("b", version="2.0.0")
    repo.commit("b changes on the feature branch")
    repo.git("checkout", "--quiet", "main")
    repo.model("c", version="2.0.0")
    repo.commit("c changes on main")
    repo.git("merge", "--quiet", "--no-ff", "-m", "merge feature", "feature")
    after = repo.head()
    # The merge commit's own views are wrong: against its second parent it shows a and c,
    # and its combined diff shows nothing. The push changed b and c.
    assert names(changed_models(repo.path, before, after)) == ["b", "c"]


def test_deleted_and_renamed_folders_in_one_push_c20(repo: GitRepo) -> None:
    before = repo.head()
    repo.git("rm", "-r", "--quiet", "models/a")
    repo.git("mv", "models/b", "models/b2")
    result = changed_models(repo.path, before, repo.commit("delete a, rename b to b2"))
    assert names(result) == ["b2"]
    assert result.deleted == ("a", "b")


def test_deleting_the_only_changed_model_gives_an_empty_matrix(repo: GitRepo) -> None:
    before = repo.head()
    repo.git("rm", "-r", "--quiet", "models/c")
    result = changed_models(repo.path, before, repo.commit())
    assert result.matrix() == {"include": []}
    assert result.to_json()["deleted"] == ["c"]


def test_first_push_of_a_branch_diffs_from_its_merge_base_c19(repo: GitRepo) -> None:
    repo.git("checkout", "--quiet", "-b", "feature")
    repo.model("c", version="3.0.0")
    repo.commit()
    result = changed_models(repo.path, ZEROS, "HEAD", ref="refs/heads/feature")
    assert names(result) == ["c"]
    assert result.since == repo.git("rev-parse", "main")
    assert result.warnings == ()


def test_first_push_of_a_branch_without_commits_builds_nothing_c19(repo: GitRepo) -> None:
    repo.git("checkout", "--quiet", "-b", "feature")
    result = changed_models(repo.path, ZEROS, "HEAD", ref="refs/heads/feature")
    assert names(result) == []
    assert "merge-base" in result.reason


def test_first_push_of_a_branch_uses_origin_default_branch_in_a_clone_c19(
    repo: GitRepo, tmp_path: Path
) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(repo.path), str(clone)], check=True)
    cloned = GitRepo.__new__(GitRepo)
    cloned.path = clone
    cloned.git("config", "user.email", "ci@example.invalid")
    cloned.git("config", "user.name", "CI test")
    cloned.git("checkout", "--quiet", "-b", "feature")
    cloned.git("branch", "--quiet", "-D", "main")  # CI checkouts have only origin/main
    cloned.model("a", version="9.0.0")
    cloned.commit()
    result = changed_models(clone, ZEROS, "HEAD", ref="refs/heads/feature")
    assert names(result) == ["a"]
    assert result.since == cloned.git("rev-parse", "origin/main")


def test_first_push_without_the_default_branch_builds_everything_c19(repo: GitRepo) -> None:
    repo.git("checkout", "--quiet", "-b", "feature")
    repo.model("a", version="4.0.0")
    repo.commit()
    result = changed_models(
        repo.path, ZEROS, "HEAD", default_branch="trunk", ref="refs/heads/feature"
    )
    assert names(result) == ["a", "b", "c"]
    assert result.since is None
    assert any("merge-base" in warning for warning in result.warnings)


def test_first_push_of_the_default_branch_builds_everything(repo: GitRepo) -> None:
    result = changed_models(repo.path, ZEROS, "HEAD", ref="refs/heads/main")
    assert names(result) == ["a", "b", "c"]


def test_force_push_diffs_from_the_merge_base_with_a_warning(repo: GitRepo) -> None:
    repo.git("checkout", "--quiet", "-b", "feature")
    fork = repo.head()
    repo.model("a", version="5.0.0")
    before = repo.commit("first attempt changes a")
    repo.git("reset", "--quiet", "--hard", fork)
    repo.model("b", version="5.0.0")
    after = repo.commit("rewritten: changes b")
    result = changed_models(repo.path, before, after)
    assert names(result) == ["b"]
    assert result.since == fork
    assert any("force push" in warning for warning in result.warnings)


def test_force_push_with_the_old_commit_missing_uses_the_default_branch(repo: GitRepo) -> None:
    repo.git("checkout", "--quiet", "-b", "feature")
    repo.model("c", version="6.0.0")
    after = repo.commit()
    gone = "1234567890abcdef1234567890abcdef12345678"
    result = changed_models(repo.path, gone, after)
    assert names(result) == ["c"]
    assert result.since == repo.git("rev-parse", "main")
    assert any("not in this clone" in warning for warning in result.warnings)


def test_missing_old_commit_on_the_default_branch_builds_everything(repo: GitRepo) -> None:
    repo.model("c", version="7.0.0")
    after = repo.commit()
    result = changed_models(repo.path, "feedface" * 5, after)
    assert names(result) == ["a", "b", "c"]
    assert result.since is None and result.warnings


def test_unrelated_history_builds_everything(repo: GitRepo) -> None:
    before = repo.head()
    repo.git("checkout", "--quiet", "--orphan", "other")
    repo.git("rm", "-r", "--quiet", "--cached", ".")
    repo.model("z")
    after = repo.commit("unrelated root")
    result = changed_models(repo.path, before, after)
    assert result.since is None
    assert names(result) == ["a", "b", "c", "z"]
    assert result.warnings


def test_no_base_in_the_event_builds_everything_with_a_warning_c22(repo: GitRepo) -> None:
    result = changed_models(repo.path, None, "HEAD")
    assert names(result) == ["a", "b", "c"]
    assert result.since is None
    assert result.warnings and "before" in result.warnings[0]


def test_backend_and_runner_come_from_model_yaml_and_the_runners_config(repo: GitRepo) -> None:
    before = repo.head()
    repo.model("trt", backend="tensorrt")
    repo.model("cpu", backend="onnxruntime")
    repo.write(
        ".github/mmaas-runners.json",
        json.dumps({"default": "cpu-runner", "tensorrt": ["self-hosted", "gpu"]}),
    )
    result = changed_models(repo.path, before, repo.commit())
    assert [(b.model, b.backend, b.runner) for b in result.include] == [
        ("cpu", "onnxruntime", "cpu-runner"),
        ("trt", "tensorrt", ["self-hosted", "gpu"]),
    ]


def test_a_multi_engine_model_runs_on_its_engines_backend(repo: GitRepo) -> None:
    before = repo.head()
    repo.model("vlm")
    engines = "engines:\n  vision:\n    source: {path: v.onnx}\n    backend: tensorrt\n"
    repo.write("models/vlm/model.yaml", 'name: vlm\nversion: "1"\n' + engines)
    repo.write(".github/mmaas-runners.json", json.dumps({"tensorrt": "gpu-runner"}))
    result = changed_models(repo.path, before, repo.commit())
    assert [(b.model, b.backend, b.runner) for b in result.include] == [
        ("vlm", "tensorrt", "gpu-runner")
    ]


def test_a_tensorrt_model_without_a_gpu_runner_is_refused(repo: GitRepo) -> None:
    before = repo.head()
    repo.model("trt", backend="tensorrt")
    with pytest.raises(SpecError, match=r"mmaas-runners.json: tensorrt: no runner label"):
        changed_models(repo.path, before, repo.commit())


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"default": "x", "tensorflow": "y"}', "tensorflow: unknown back end"),
        ('{"default": []}', "default: must be a runner label"),
    ],
)
def test_an_invalid_runners_config_names_the_file_and_key(
    repo: GitRepo, config: str, message: str
) -> None:
    before = repo.head()
    repo.write(".github/mmaas-runners.json", config)
    repo.model("a", version="8.0.0")
    with pytest.raises(SpecError, match=message):
        changed_models(repo.path, before, repo.commit())


def test_an_unparsable_model_yaml_names_the_file(repo: GitRepo) -> None:
    before = repo.head()
    repo.write("models/a/model.yaml", "name: [unclosed\n")
    with pytest.raises(SpecError, match=r"models/a/model.yaml: not valid YAML"):
        changed_models(repo.path, before, repo.commit())


def test_a_model_folder_with_an_invalid_name_is_refused(repo: GitRepo) -> None:
    before = repo.head()
    repo.model("Bad$(name)")
    with pytest.raises(SpecError, match=r"not a valid model name"):
        changed_models(repo.path, before, repo.commit())


def test_an_unknown_head_or_a_folder_outside_git_is_a_usage_error(
    repo: GitRepo, tmp_path: Path
) -> None:
    with pytest.raises(UsageError, match="names no commit"):
        changed_models(repo.path, None, "no-such-ref")
    (tmp_path / "plain").mkdir()
    with pytest.raises(UsageError, match="not a git repository"):
        changed_models(tmp_path / "plain", None, "HEAD")


def test_a_new_model_whose_onnx_is_git_ignored_is_warned_about(repo: GitRepo) -> None:
    """CI checks out the commit: a new model's ONNX kept out by .gitignore is not there,
    so the build could never run; a committed source and a URL source are fine."""
    before = repo.head()
    repo.write(".gitignore", "models/*/*.onnx\n")
    repo.write("models/d/model.yaml", "name: d\nversion: '1'\nsource: {path: d.onnx}\n")
    repo.write("models/d/d.onnx", "onnx bytes\n")  # ignored: git add -A leaves it out
    repo.write("models/e/model.yaml", "name: e\nversion: '1'\nsource: {path: e.onnx}\n")
    repo.write("models/e/e.onnx", "onnx bytes\n")
    repo.git("add", "-f", "models/e/e.onnx")
    url = "{url: 'https://example.org/f.onnx', sha256: '" + "0" * 64 + "'}"
    repo.write("models/f/model.yaml", f"name: f\nversion: '1'\nsource: {url}\n")
    result = changed_models(repo.path, before, repo.commit())
    assert names(result) == ["d", "e", "f"]
    (warning,) = result.warnings
    assert "new model d: its ONNX source models/d/d.onnx is not in commit" in warning
    assert "git-ignored by .gitignore:1: models/*/*.onnx" in warning
    assert "git add -f models/d/d.onnx" in warning
    # an existing model is not warned about again (CI may fetch its source: fetch_models)
    repo.model("d", version="1.1.0")
    again = changed_models(repo.path, repo.head(), repo.commit())
    assert again.warnings == ()
