"""A new model CI could never build: its model.yaml names a local ONNX file (``source:
{path: ...}``, top-level or per engine) that is not in the commit, usually because
``.gitignore`` keeps ``models/*/*.onnx`` out of git. The build job checks out the commit,
so the file is missing there; ``mmaas ci changed`` warns, naming the file and the ignore
rule, instead of letting the build fail later (or, where the folder is fetched by a
workflow step, saying what that step must provide). URL sources are fetched by the build
and are fine.
"""

from __future__ import annotations

import posixpath

import yaml

from mmaas.ci.git import Git


def local_sources(git: Git, commit: str, spec_path: str) -> list[str]:
    """The repository paths of the local ONNX sources the model.yaml at ``spec_path`` in
    ``commit`` names (empty when it is unreadable: the build reports that)."""
    try:
        data = yaml.safe_load(git.show(commit, spec_path) or "")
    except yaml.YAMLError:
        return []
    if not isinstance(data, dict):
        return []
    entries = [data.get("source")]
    engines = data.get("engines")
    if isinstance(engines, dict):
        entries += [e.get("source") for e in engines.values() if isinstance(e, dict)]
    folder = posixpath.dirname(spec_path)
    return [
        posixpath.normpath(posixpath.join(folder, entry["path"]))
        for entry in entries
        if isinstance(entry, dict) and isinstance(entry.get("path"), str)
    ]


def missing_sources(git: Git, commit: str, models: dict[str, str]) -> list[str]:
    """One warning per local source of ``models`` (name -> model.yaml path) that is not in
    ``commit``'s tree, saying why (the ignore rule) and the fix."""
    warnings = []
    for name, spec_path in sorted(models.items()):
        for path in local_sources(git, commit, spec_path):
            if git.files(commit, path):
                continue
            rule = git.ignored_by(path)
            why = f"git-ignored by {rule}" if rule else "not committed"
            warnings.append(
                f"new model {name}: its ONNX source {path} is not in commit {commit[:12]} "
                f"({why}), so CI's build cannot find it; commit it (`git add -f {path}`, or "
                "Git LFS), or name a url: source with its sha256 in model.yaml"
            )
    return warnings
