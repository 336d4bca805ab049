"""``mmaas build``'s console (rich): one line of progress per phase, a summary at the end.

Phases (the pipeline names them: ``check`` whether the image is already up to date, then
``compile``, ``package``, ``verify``) show a spinner with the phase's elapsed seconds and
what it does now: the BuildKit step that runs (``#12 [builder 5/5] RUN ...``) or the builder
stage's own progress line (``mmaas stage: profile check at opt (x: 2x3x640x640)``, one per
profile point), so a long compile visibly works. Every raw output line (BuildKit's, the
compile container's, trtexec's) goes to the log file, which the console names when the
first phase starts and again on failure; ``verbose`` prints them too; ``quiet`` prints
nothing but errors. When stderr is no terminal (CI logs) there is no spinner and no colour:
plain lines, one per phase start, per new step or stage line, per finished phase, and
``<phase> still running, N s`` when output goes on for :data:`HEARTBEAT_S` without one (a
long trtexec compile). Warnings in the output (``mmaas: warning: ...``, e.g. a rejected
timing cache) are always printed.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Literal

from rich.console import Console, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from mmaas.core import proc

if TYPE_CHECKING:
    from mmaas.build.pipeline import BuildResult

Mode = Literal["normal", "verbose", "quiet"]
STEP = re.compile(r"^#\d+ \[([^\]]+)\] (.+)$")  # BuildKit --progress plain step header
STAGE = re.compile(r"mmaas stage: (.+)$")  # the builder stage's progress lines
WARNING = re.compile(r"mmaas: warning: (.+)$")  # e.g. a rejected timing cache
STATUS_CHARS = 100
CACHE_OUTCOMES = {
    "hit": "hit (local engine cache)",
    "hit-registry": "hit (pulled from the registry)",
    "miss": "miss (compiled)",
    "off": "off",
    "current": "up to date (the image was built from the same inputs: no Docker build)",
}
HEARTBEAT_S = 30.0  # plain output: a "still running" line after this long without one
PLAIN_WIDTH = 200  # columns when the output is no terminal (no wrapping in CI logs)


def make_console(*, stderr: bool) -> Console:
    """A console on stderr or stdout: a terminal's own width, else :data:`PLAIN_WIDTH`
    columns and no colour (rich turns colour off when the file is no terminal)."""
    console = Console(stderr=stderr, highlight=False, soft_wrap=True, emoji=False)
    if not console.is_terminal:
        console = Console(
            stderr=stderr, highlight=False, soft_wrap=True, emoji=False, width=PLAIN_WIDTH
        )
    return console


class BuildConsole:
    """The console of one build (see the module docstring); draw it with :meth:`running`.

    Args:
        log: the log file, rewritten for this build (its folder is created).
        mode: ``normal``, ``verbose`` (raw lines printed too) or ``quiet`` (errors only).
        console: where to draw (default: stderr).
    """

    def __init__(self, log: Path, mode: Mode = "normal", console: Console | None = None) -> None:
        self.log_path, self.mode = log, mode
        self.console = console or make_console(stderr=True)
        self._log: IO[str] | None = None
        self._live: Live | None = None
        self._phase: tuple[str, str, float] | None = None
        self._status = ""
        self._spinner = Spinner("dots")
        self._started = False  # a phase has started (the log was named)
        self._said = time.monotonic()  # the last plain status line
        self.heartbeat_s = HEARTBEAT_S

    @contextmanager
    def running(self) -> Iterator[BuildConsole]:
        """Take the raw output of every streamed command (:func:`mmaas.core.proc.output_to`),
        draw; the log is created at its first line, so an error before any (a spec error,
        no GPU) writes no file and is the only output. The log is named when the first
        phase starts and again when the build fails or is interrupted after that.

        Raises:
            OSError: the log file cannot be written.
        """
        with proc.output_to(self.output):
            live = self.mode == "normal" and self.console.is_terminal
            self._live = Live(self, console=self.console, transient=True) if live else None
            try:
                if self._live:
                    self._live.start()
                yield self
                self.phase("")
            except BaseException as exc:
                self._phase = None
                if self._started:
                    how = "stopped" if isinstance(exc, KeyboardInterrupt) else "failed"
                    where = escape(str(self.log_path))
                    self.console.print(f"mmaas: the build {how}; its log: {where}", emoji=False)
                raise
            finally:
                if self._live:
                    self._live.stop()
                self._live = None
                if self._log is not None:
                    self._log.close()
                    self._log = None

    def say(self, message: str) -> None:
        """One line of news (cache hit, tag): logged, and printed unless quiet."""
        self._write(f"mmaas: {message}")
        self._print(f"[cyan]mmaas:[/cyan] {escape(message)}")

    def phase(self, name: str, detail: str = "") -> None:
        """End the running phase (printing its time) and start ``name`` (``""``: none)."""
        if self._phase is not None:
            done, what, started = self._phase
            seconds = time.monotonic() - started
            self._print(f"[green]✓[/green] {escape(f'{done} {what}'.strip())} {seconds:.1f} s")
        self._phase = (name, detail, time.monotonic()) if name else None
        self._status = ""
        if name and not self._started:
            self._started = True
            self._print(f"[dim]mmaas: build log: {escape(str(self.log_path))}[/dim]")
        if name:
            self._write(f"mmaas: phase {name} {detail}".rstrip())
            if not self._live:
                self._print(f"[bold]▸ {escape(f'{name} {detail}'.strip())}[/bold]")

    def output(self, line: str) -> None:
        """One raw output line: logged; printed with ``verbose``; a warning is printed; a
        new BuildKit step or stage line becomes the status of the running phase."""
        self._write(line)
        if self.mode == "verbose":
            self.console.print(escape(line), emoji=False)
        if (warning := WARNING.search(line)) and self.mode != "verbose":
            self._print(f"[yellow]warning:[/yellow] {escape(warning.group(1))}")
        plain = self.mode == "normal" and not self._live
        found = STAGE.search(line) or STEP.match(line)
        status = " ".join(found.groups())[:STATUS_CHARS] if found else self._status
        if status != self._status:
            self._status = status
            if plain:
                self._say_plain(f"  {status}")
        elif plain and self._phase and time.monotonic() - self._said >= self.heartbeat_s:
            name, _, started = self._phase
            self._say_plain(f"  {name} still running, {time.monotonic() - started:.0f} s")

    def __rich__(self) -> RenderableType:
        """The live line: spinner, phase, elapsed seconds, what runs now."""
        if self._phase is None:
            return ""
        name, detail, started = self._phase
        text = f"{name} {detail}".strip() + f"  {time.monotonic() - started:.0f} s"
        self._spinner.update(text=escape(f"{text}  {self._status}" if self._status else text))
        return self._spinner

    def _say_plain(self, text: str) -> None:
        self._said = time.monotonic()
        self._print(escape(text))

    def _print(self, markup: str) -> None:
        if self.mode != "quiet":
            self.console.print(markup, emoji=False)  # ":abc:" in a key is no emoji

    def _write(self, line: str) -> None:
        if self._log is None:  # the build's first line: the log is rewritten
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = self.log_path.open("w", encoding="utf-8")
        self._log.write(line + "\n")
        self._log.flush()


def summary_table(result: BuildResult, size_bytes: int | None, log: Path) -> Table:
    """The build's summary (what ``mmaas build --json`` holds, for people): the image, its
    id and size (bytes as Docker counts them), each engine's file and blake3, its engine
    cache outcome and its profile check's latency at each point (from the engine's
    report; rows named ``<engine>: ...`` when the model has several), each asset, the
    build time and the log file."""
    rows = [
        ("image", f"{result.image}  {result.image_id}"),
        ("size", "?" if size_bytes is None else f"{size_bytes / 1e6:.1f} MB"),
    ]
    several = len(result.manifest.engines) > 1
    for entry in result.manifest.engines:
        prefix = f"{entry.name}: " if several else ""
        engine, build = entry.manifest.engine, result.engines[entry.name]
        cache = CACHE_OUTCOMES.get(build.cache, build.cache)
        rows += [
            (f"{prefix}engine", f"{engine.path}  {engine.blake3}"),
            (f"{prefix}engine cache", f"{cache}  {build.key or ''}".rstrip()),
        ]
        for check in entry.manifest.report.get("profile_check", []):
            shapes = ", ".join(f"{n}: {'x'.join(map(str, s))}" for n, s in check["shapes"].items())
            point = f"{prefix}profile {check['point']}"
            rows.append((point, f"{check['latency_ms']:.2f} ms  ({shapes})"))
    rows += [(f"asset {a.name}", f"{a.file.path}  {a.file.blake3}") for a in result.manifest.assets]
    rows += [("time", f"{result.seconds:.1f} s"), ("log", str(log))]
    table = Table(
        title=Text(f"mmaas build {result.image}"), title_justify="left", show_header=False
    )
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for name, value in rows:
        table.add_row(Text(name), Text(value))  # Text: no markup, no emoji codes
    return table
