"""Progress reporters for the CLI: a rich bar on a terminal, plain lines otherwise."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress as RichBar,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from ccbench.console import seconds_or_ms
from ccbench.executor.local import Outcome, Progress


def params_text(params: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


def _label(runspec: Any) -> str:
    p = params_text(getattr(runspec, "params", {}) or {})
    rep = getattr(runspec, "repetition", None)
    parts = [runspec.run_id[:12]]
    if p:
        parts.append(p)
    if rep is not None:
        parts.append(f"rep={rep}")
    return " ".join(parts)


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if text and text.strip() else ""


class PlainProgress(Progress):
    """One line per run of this invocation: ``[3/12] <run> <params> rep=0 ok 1.200 s``."""

    def __init__(self, console: Console):
        self.console = console
        self.todo = 0
        self.n = 0

    def start(self, total: int, done: int, todo: int) -> None:
        self.todo = todo
        if done:
            self.console.print(f"{done} of {total} runs already finished; running {todo}", highlight=False)
        else:
            self.console.print(f"running {todo} runs", highlight=False)

    def run_finished(self, runspec: Any, outcome: Outcome) -> None:
        self.n += 1
        line = f"[{self.n}/{self.todo}] {_label(runspec)} {outcome.status} {seconds_or_ms(outcome.wall_time_s * 1e6)}"
        if outcome.status != "ok" and outcome.error:
            line += f": {_first_line(outcome.error)}"
        self.console.print(escape(line), highlight=False, soft_wrap=True)

    def run_retried(self, runspec: Any, why: str) -> None:
        """Dask executor: a run lost with its worker goes out again."""
        self.console.print(escape(f"retrying {_label(runspec)}: {why}"), highlight=False, soft_wrap=True)

    def note(self, text: str) -> None:
        """Dask executor: something the user should know that is not a run's outcome."""
        self.console.print(escape(text), highlight=False, soft_wrap=True)

    def cluster_status(self, workers: int, inflight: int) -> None:
        """Dask executor: a line whenever the number of workers changes."""
        if workers != getattr(self, "_workers", None):
            self._workers = workers
            self.console.print(f"cluster: {workers} worker{'s' if workers != 1 else ''} up, "
                               f"{inflight} run{'s' if inflight != 1 else ''} in flight", highlight=False)


class BarProgress(Progress):
    """A rich progress bar (runs done/total, elapsed, ETA); failures printed above it."""

    def __init__(self, console: Console):
        self.console = console
        self.bar = RichBar(
            TextColumn("[bold]runs"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("•"),
            TimeElapsedColumn(),
            TextColumn("• ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[cluster]}"),
            console=console,
            transient=False,
        )
        self.task = None

    def start(self, total: int, done: int, todo: int) -> None:
        if done:
            self.console.print(f"{done} of {total} runs already finished; running {todo}", highlight=False)
        self.bar.start()
        # Count only this invocation's runs so the ETA is not skewed by skipped ones.
        self.task = self.bar.add_task("runs", total=todo, cluster="")

    def run_finished(self, runspec: Any, outcome: Outcome) -> None:
        if outcome.status != "ok":
            colour = "red" if outcome.status == "failed" else "yellow"
            self.console.print(
                f"[{colour}]{outcome.status}[/{colour}] {escape(_label(runspec))}: "
                f"{escape(_first_line(outcome.error))}",
                highlight=False,
            )
        self.bar.advance(self.task)

    def run_retried(self, runspec: Any, why: str) -> None:
        self.console.print(f"[yellow]retrying[/yellow] {escape(_label(runspec))}: {escape(why)}", highlight=False)

    def note(self, text: str) -> None:
        self.console.print(f"[yellow]note[/yellow] {escape(text)}", highlight=False, soft_wrap=True)

    def cluster_status(self, workers: int, inflight: int) -> None:
        """Dask executor: workers up and runs in flight, after the ETA."""
        if self.task is not None:
            self.bar.update(self.task, cluster=f"• {workers} workers, {inflight} in flight")

    def finish(self) -> None:
        self.bar.stop()


def make_progress(console: Console) -> Progress:
    return BarProgress(console) if console.is_terminal else PlainProgress(console)
