"""Real git repositories made in a test's tmp_path, for change-detection tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

ZEROS = "0" * 40


class GitRepo:
    """A git work tree on branch ``main`` with helpers to write files and commit."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "--quiet", "--initial-branch=main")
        self.git("config", "user.email", "ci@example.invalid")
        self.git("config", "user.name", "CI test")
        self.git("config", "commit.gpgsign", "false")

    def git(self, *args: str) -> str:
        """Run git in the repository; return stdout stripped."""
        done = subprocess.run(
            ["git", "-C", str(self.path), *args], capture_output=True, text=True, check=True
        )
        return done.stdout.strip()

    def write(self, relative: str, text: str = "x\n") -> None:
        target = self.path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    def model(self, name: str, backend: str | None = None, version: str = "1.0.0") -> None:
        """Write ``models/<name>/model.yaml`` (and a stand-in weights file)."""
        lines = [f"name: {name}", f'version: "{version}"', "source: {path: model.onnx}"]
        if backend:
            lines.append(f"backend: {backend}")
        self.write(f"models/{name}/model.yaml", "\n".join(lines) + "\n")
        self.write(f"models/{name}/model.onnx", f"weights of {name} {version}\n")

    def commit(self, message: str = "change") -> str:
        """Stage everything and commit; return the commit id."""
        self.git("add", "--all")
        self.git("commit", "--quiet", "--allow-empty", "-m", message)
        return self.head()

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")
