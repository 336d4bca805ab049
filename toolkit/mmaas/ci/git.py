"""The few read-only git queries change detection needs, run through :mod:`mmaas.core.proc`.

Every query that can legitimately find nothing (an unknown commit, no merge-base)
returns None instead of raising, so callers decide what a missing answer means.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from mmaas.core import proc
from mmaas.core.errors import ProcessError, UsageError


class Git:
    """Read-only queries on the git repository at ``repo`` (``git -C repo ...``).

    Raises:
        UsageError: (on construction) ``repo`` is not inside a git work tree.
    """

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        probe = self._run("rev-parse", "--git-dir", check=False)
        if probe.returncode != 0:
            raise UsageError(
                f"{repo} is not a git repository ({probe.stderr.strip()})",
                hint="run inside the checkout, with its history "
                "(actions/checkout with fetch-depth: 0)",
            )

    def commit(self, ref: str) -> str | None:
        """The full commit id ``ref`` names, or None when it names no commit here."""
        done = self._run(
            "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", check=False
        )
        return done.stdout.strip() if done.returncode == 0 else None

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        """True when ``ancestor`` is reachable from ``descendant`` (or equals it)."""
        done = self._run("merge-base", "--is-ancestor", ancestor, descendant, check=False)
        return done.returncode == 0

    def merge_base(self, one: str, other: str) -> str | None:
        """The best common ancestor of two commits, or None when they share no history."""
        done = self._run("merge-base", one, other, check=False)
        return done.stdout.strip() if done.returncode == 0 else None

    def branch_tip(self, branch: str) -> str | None:
        """The commit of ``origin/<branch>`` (what CI checkouts have), else of the local
        branch ``<branch>``; None when neither exists."""
        return self.commit(f"refs/remotes/origin/{branch}") or self.commit(f"refs/heads/{branch}")

    def head_ref(self) -> str | None:
        """The ref ``HEAD`` points at (``refs/heads/feature``); None when detached."""
        done = self._run("symbolic-ref", "--quiet", "HEAD", check=False)
        return done.stdout.strip() if done.returncode == 0 else None

    def changed_paths(self, since: str, until: str) -> list[str]:
        """Paths that differ between the trees of ``since`` and ``until`` (renames listed as
        their old and new paths: ``--no-renames``)."""
        done = self._run("diff", "--name-only", "--no-renames", "-z", since, until, "--")
        return [path for path in done.stdout.split("\0") if path]

    def files(self, commit: str, folder: str) -> list[str]:
        """Every file path under ``folder`` in ``commit``'s tree (recursive)."""
        done = self._run("ls-tree", "-r", "--name-only", "-z", commit, "--", folder)
        return [path for path in done.stdout.split("\0") if path]

    def show(self, commit: str, path: str) -> str | None:
        """The text of ``path`` in ``commit``'s tree, or None when it has no such file."""
        done = self._run("show", f"{commit}:{path}", check=False)
        return done.stdout if done.returncode == 0 else None

    def ignored_by(self, path: str) -> str | None:
        """The ignore rule that keeps ``path`` out of git (``.gitignore:12:models/*/*.onnx``),
        or None when none does."""
        done = self._run("check-ignore", "--verbose", "--no-index", "--", path, check=False)
        if done.returncode != 0 or not done.stdout.strip():
            return None
        source, line, pattern = done.stdout.split("\t")[0].split(":", 2)
        return f"{source}:{line}: {pattern}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        try:
            return proc.run(["git", "-C", str(self.repo), *args], check=check, what="git")
        except ProcessError as exc:
            raise UsageError(f"git {args[0]} failed in {self.repo}: {exc}") from exc
