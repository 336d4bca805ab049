"""The README's `docker run` + curl block, run as written (bash, curl, python3) against the
real server: only the `docker run` line is left out and `localhost:8000` / `localhost:8002`
point at the test server's HTTP and metrics ports."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from paths import ROOT

from ..conftest import RunningServer

INTRO = "Run a built image and talk to it with curl"


def readme_commands() -> list[str]:
    """The README's curl block, one complete shell command per entry (lines are joined
    until ``bash -n`` parses them: backslash continuations, quotes over two lines)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(re.escape(INTRO) + r".*?```sh\n(.*?)```", text, re.S)
    assert block, f"README.md has no sh block after {INTRO!r}"
    commands, pending = [], ""
    for line in block.group(1).splitlines(keepends=True):
        pending += line
        if pending.rstrip().endswith("\\"):
            continue
        if subprocess.run(["bash", "-n", "-c", pending], capture_output=True).returncode == 0:
            commands.append(pending.strip())
            pending = ""
    assert not pending.strip(), f"README.md's curl block ends inside a command: {pending!r}"
    return [command for command in commands if command]


def test_readme_curl_examples_answer_as_their_comments_say(
    module_server, cls_dir: Path, tmp_path: Path
) -> None:
    server: RunningServer = module_server(cls_dir)
    commands = readme_commands()
    assert commands[0].startswith("docker run ") and "-p 8000:8000" in commands[0]
    answers = []
    for command in commands[1:]:
        command = command.replace("localhost:8000", server.http_url).replace(
            "localhost:8002", f"127.0.0.1:{server.metrics_port}"
        )
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", command],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, (command, done.stderr)
        answers.append(done.stdout)
    ready, metadata, _, infer, metrics = answers
    assert json.loads(ready) == {"ready": True}
    assert json.loads(metadata)["inputs"] == [
        {"name": "x", "datatype": "FP32", "shape": [-1, 3, 48, 192]}
    ]
    output = json.loads(infer)["outputs"][0]
    assert output["shape"] == [1, 2] and len(output["data"]) == 2
    assert re.search(r'^nv_inference_request_success\{model="ppocr-cls".*\} [1-9]', metrics, re.M)
