"""``mmaas build``'s console without Docker: phases and steps as plain
lines when the output is no terminal (CI), a spinner on a terminal, raw lines only with
verbose and always in the log, quiet prints nothing, a failure names the log, the summary
table. Real subprocesses feed the console through :func:`mmaas.core.proc.stream`; the
Docker side (``mmaas build`` on a real engine) is in tests/build/test_image_e2e.py."""

from __future__ import annotations

import io
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console
from tests.build.test_current import model_dir

from mmaas.build.pipeline import BuildResult, EngineBuild
from mmaas.cli import build as build_cli
from mmaas.cli.progress import BuildConsole, summary_table
from mmaas.core import proc
from mmaas.core.errors import ProcessError, UsageError
from mmaas.core.manifest import FileRecord
from mmaas.core.model_manifest import Asset, read_model_manifest

# What a compile build prints (BuildKit --progress plain), then the stage's own lines.
BUILDKIT = """#1 [internal] load build definition from Dockerfile
#1 DONE 0.0s
#7 [builder 4/5] RUN python -m mmaas.stage build /opt/mmaas/request.json /opt/mmaas/engine
#7 0.812 mmaas stage: compiling model.onnx (onnxruntime)
#7 1.204 a raw line of the compile
#7 1.300 mmaas stage: profile check at min (x: 1x3x32x32)
#7 1.400 mmaas stage: profile check at opt (x: 1x3x640x640)
#7 1.500 mmaas: warning: the stored timing cache was rejected
#7 DONE 1.6s
"""


def plain() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200, highlight=False, soft_wrap=True), out


def compile_build(console: BuildConsole) -> None:
    """The phases of a build whose compile is a real subprocess printing BUILDKIT."""
    console.phase("check", "mmaas-test/m:1")
    console.say("engine cache miss sha256:abc: compiling")
    console.phase("compile", "m")
    proc.stream([sys.executable, "-c", f"print({BUILDKIT!r}, end='')"], what="compile")
    console.phase("package", "mmaas-test/m:1")


def test_plain_lines_show_each_phase_and_step_and_hide_raw_lines(tmp_path: Path, capfd) -> None:
    screen, out = plain()
    console = BuildConsole(tmp_path / "logs" / "build.log", console=screen)
    with console.running():
        compile_build(console)
    text = out.getvalue()
    assert "\x1b[" not in text  # no colour, no cursor moves
    assert text.splitlines()[0] == f"mmaas: build log: {tmp_path / 'logs' / 'build.log'}"
    for line in (
        "▸ check mmaas-test/m:1",
        "mmaas: engine cache miss sha256:abc: compiling",
        "▸ compile m",
        "  builder 4/5 RUN python -m mmaas.stage build /opt/mmaas/request.json /opt/mmaas/engine",
        "  compiling model.onnx (onnxruntime)",
        "  profile check at min (x: 1x3x32x32)",
        "  profile check at opt (x: 1x3x640x640)",
        "warning: the stored timing cache was rejected",
        "▸ package mmaas-test/m:1",
    ):
        assert line in text.splitlines(), text
    assert [line.split()[1] for line in text.splitlines() if line.startswith("✓")] == [
        "check",
        "compile",
        "package",
    ]
    assert "a raw line of the compile" not in text and "#1 DONE" not in text
    assert capfd.readouterr().err == ""  # the streamed output went to the console only
    log = (tmp_path / "logs" / "build.log").read_text()
    assert BUILDKIT in log  # every raw line, in order
    assert "mmaas: phase compile m\n" in log and "mmaas: engine cache miss" in log


def test_verbose_prints_the_raw_lines_and_quiet_prints_nothing(tmp_path: Path) -> None:
    screen, out = plain()
    console = BuildConsole(tmp_path / "v.log", "verbose", console=screen)
    with console.running():
        compile_build(console)
    assert "#7 1.204 a raw line of the compile" in out.getvalue().splitlines()
    screen, out = plain()
    console = BuildConsole(tmp_path / "q.log", "quiet", console=screen)
    with console.running():
        compile_build(console)
    assert out.getvalue() == ""
    assert BUILDKIT in (tmp_path / "q.log").read_text()


def test_a_terminal_gets_a_spinner_and_the_finished_phases(tmp_path: Path) -> None:
    out = io.StringIO()
    screen = Console(file=out, width=120, force_terminal=True, highlight=False)
    console = BuildConsole(tmp_path / "t.log", console=screen)
    with console.running():
        compile_build(console)
        assert console.__rich__() is not None
    text = out.getvalue()
    assert "\x1b[" in text and "check mmaas-test/m:1" in text and "a raw line" not in text
    assert "▸ compile" not in text  # the live line shows the phase instead


def test_a_failed_build_names_its_log_even_when_quiet(tmp_path: Path) -> None:
    screen, out = plain()
    console = BuildConsole(tmp_path / "f.log", "quiet", console=screen)
    with pytest.raises(ProcessError), console.running():
        console.phase("compile", "m")
        proc.stream([sys.executable, "-c", "print('#9 ERROR: boom'); raise SystemExit(3)"])
    assert out.getvalue() == f"mmaas: the build failed; its log: {tmp_path / 'f.log'}\n"
    assert "#9 ERROR: boom" in (tmp_path / "f.log").read_text()


def test_the_summary_table_holds_image_engine_cache_and_profile_latencies(
    tmp_path: Path,
) -> None:
    model = read_model_manifest(model_dir(tmp_path))
    manifest = model.engines[0].manifest
    result = BuildResult(
        "mmaas-test/tiny:1.0.0", "sha256:" + "c" * 64, model, {}, "sha256:plan", 0.42,
        {"model": EngineBuild("sha256:" + "d" * 64, "current")},
    )  # fmt: skip
    screen, out = plain()
    screen.print(summary_table(result, 301_300_000, tmp_path / "build.log"))
    text = out.getvalue()
    assert f"mmaas-test/tiny:1.0.0  sha256:{'c' * 64}" in text
    assert f"model.ort.onnx  {manifest.engine.blake3}" in text and "blake3:blake3" not in text
    assert "up to date (the image was built from the same inputs: no Docker build)" in text
    assert "301.3 MB" in text and "0.4 s" in text and str(tmp_path / "build.log") in text
    for check in manifest.report["profile_check"]:
        assert f"profile {check['point']}" in text
        assert f"{check['latency_ms']:.2f} ms  (x: " in text


def test_verbose_and_quiet_together_are_a_usage_error() -> None:
    outcome = CliRunner().invoke(build_cli.command, ["m", "-v", "-q"], standalone_mode=False)
    assert isinstance(outcome.exception, UsageError)
    assert "--verbose and --quiet" in str(outcome.exception)


def test_a_missing_model_is_a_usage_error_and_writes_no_log(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    outcome = CliRunner().invoke(build_cli.command, ["missing"], standalone_mode=False)
    assert isinstance(outcome.exception, UsageError)
    assert "missing: no such model folder or model.yaml" in str(outcome.exception)
    assert list(tmp_path.iterdir()) == []


def test_an_error_before_the_first_phase_is_the_only_output(tmp_path: Path) -> None:
    screen, out = plain()
    log = tmp_path / "logs" / "e.log"
    with pytest.raises(UsageError), BuildConsole(log, console=screen).running():
        raise UsageError("no NVIDIA GPU is visible here")  # e.g. the TensorRT preflight
    assert out.getvalue() == ""
    assert not log.parent.exists()  # nothing half-written: no empty log, no folder


def test_an_interrupted_build_says_it_stopped_and_names_its_log(tmp_path: Path) -> None:
    screen, out = plain()
    console = BuildConsole(tmp_path / "i.log", console=screen)
    with pytest.raises(KeyboardInterrupt), console.running():
        console.phase("compile", "m")
        raise KeyboardInterrupt
    assert (
        out.getvalue().splitlines()[-1]
        == f"mmaas: the build stopped; its log: {tmp_path / 'i.log'}"
    )
    assert "mmaas: phase compile m" in (tmp_path / "i.log").read_text()


def test_plain_output_says_a_long_phase_is_still_running(tmp_path: Path) -> None:
    screen, out = plain()
    console = BuildConsole(tmp_path / "h.log", console=screen)
    with console.running():
        console.phase("compile", "m")
        console.output("[I] [TRT] a trtexec line before the first heartbeat is due")
        console.heartbeat_s = 0.0  # as if HEARTBEAT_S had passed since the last line
        console.output("[I] [TRT] Local timing cache in use. Profiling results ...")
    lines = out.getvalue().splitlines()
    assert lines.count("  compile still running, 0 s") == 1, lines
    assert not any("[TRT]" in line for line in lines)


def test_the_summary_table_names_each_engine_and_asset_of_a_multi_engine_model(
    tmp_path: Path,
) -> None:
    one = read_model_manifest(model_dir(tmp_path)).engines[0]
    vocab = FileRecord("assets/vocab.txt", "blake3:" + "e" * 64, "sha256:" + "f" * 64, 9)
    model = replace(
        read_model_manifest(model_dir(tmp_path / "again")),
        engines=(replace(one, name="det", directory="det"), replace(one, name="cls")),
        assets=(Asset("vocab", vocab),),
    )
    builds = {"det": EngineBuild("sha256:" + "d" * 64, "hit"), "cls": EngineBuild(None, "miss")}
    result = BuildResult(
        "mmaas-test/ocr:1", "sha256:" + "c" * 64, model, {}, "sha256:p", 1.0, builds
    )
    screen, out = plain()
    screen.print(summary_table(result, None, tmp_path / "build.log"))
    text = out.getvalue()
    for name in ("det", "cls"):
        assert f"{name}: engine " in text and f"{name}: profile opt" in text
    assert "det: engine cache " in text and "d" * 64 in text
    assert "asset vocab" in text and f"assets/vocab.txt  {vocab.blake3}" in text
