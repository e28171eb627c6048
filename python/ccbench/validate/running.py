"""Running a validation plan: the sim half (in worker processes), then the
linux half one run at a time (real time, CPU-sensitive), through the normal
executor into one results store. Like any study it resumes: runs already
finished are skipped. A linux run the backend marks *suspect* (the emulator
was late, a queue outside it dropped, a flow was limited by something other
than the network...) is run again up to ``retry_suspect`` times; suspect runs
that remain are left out of the comparison and counted.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from ccbench.executor.retry import pause_before_retry, set_aside_suspect
from ccbench.validate.grid import Plan

@dataclass
class RunLog:
    """What this invocation did (kept in validation.json)."""

    command: str = ""
    started_at: str = ""
    finished_at: str = ""
    executed: dict = field(default_factory=lambda: {"sim": 0, "linux": 0})
    skipped: dict = field(default_factory=lambda: {"sim": 0, "linux": 0})
    suspect_retried: int = 0
    load_before_linux: Optional[list] = None
    load_during_linux_max: Optional[float] = None
    interrupted: bool = False

    def as_dict(self) -> dict:
        return dict(self.__dict__)


class LoadWatch:
    """Wraps a progress reporter; records the 1-min load average after each run."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.loads: list[float] = []

    def start(self, total: int, done: int, todo: int) -> None:
        self.inner.start(total, done, todo)

    def run_finished(self, runspec: Any, outcome: Any) -> None:
        self.loads.append(os.getloadavg()[0])
        self.inner.run_finished(runspec, outcome)

    def interrupted(self) -> None:
        self.inner.interrupted()

    def finish(self) -> None:
        self.inner.finish()


def set_aside(out: Path, run_ids: Sequence[str], why: str) -> list[str]:
    """Mark every finished run among ``run_ids`` failed, ``why`` in its note,
    so the executor runs it again (the new run replaces the row and its
    data); returns them. Suspect runs alone: ``executor.retry``."""
    from ccbench.store import DB_FILENAME, Store

    if not (out / DB_FILENAME).exists():
        return []
    with Store(out) as store:
        ids = [r.run_id for r in store.runs(run_ids=run_ids) if r.status in ("ok", "suspect")]
        store.set_aside(ids, f"set aside to be run again by ccbench validate ({why}): ")
    return ids


def sim_settings_changed(out: Path, runs: Sequence[Any]) -> list[str]:
    """The finished runs among ``runs`` stored with another config than
    planned. The sim runs' settings outside their run ids (the kernel's HZ,
    ``--sim-host-jitter``, ``--sim-path-jitter``) are not in the ids that
    resume matches on, so a results directory can hold a sim run made with
    other settings under the same id."""
    from ccbench.store import DB_FILENAME, Store

    if not (out / DB_FILENAME).exists():
        return []
    planned = {r.run_id: r.config for r in runs}
    with Store(out) as store:
        return [r.run_id for r in store.runs(run_ids=list(planned), with_config=True)
                if r.status in ("ok", "suspect") and r.config != planned[r.run_id]]


def execute_plan(p: Plan, out: Path, *, jobs: int = 1, retry_suspect: int = 1, retry_pause_s: float = 0.0,
                 console: Any = None, log: Optional[RunLog] = None, only: Optional[set] = None) -> RunLog:
    """Run what is not finished yet: every sim run, then every linux run
    (serially), retrying suspect linux runs after a pause
    (:func:`~ccbench.executor.retry.pause_before_retry`); with ``only``, just the plan's runs with those ids (a
    re-check's new runs: the earlier runs' suspect ones have had their
    retries)."""
    from ccbench import backends
    from ccbench.executor import execute
    from ccbench.executor.progress import make_progress

    log = log or RunLog()
    progress = (lambda: make_progress(console)) if console is not None else (lambda: None)
    sim, linux = backends.get("sim"), backends.get("linux")
    sim.check()
    linux.check()

    def chosen(backend: str) -> list:
        return [r for r in p.runs(backend) if only is None or r.run_id in only]

    # the kernel's verdict on BPF CCAs before any run, as `ccbench run` asks it (a usage error, exit 2)
    linux.preflight(chosen("linux"))

    s = execute(p.studies["sim"], chosen("sim"), sim, out, jobs=jobs, progress=progress(), versions_apart=False)
    log.executed["sim"] += s.executed
    log.skipped["sim"] += s.skipped
    if s.interrupted:
        log.interrupted = True
        return log
    log.load_before_linux = [round(x, 2) for x in os.getloadavg()]
    if console is not None and log.load_before_linux[0] > 1.0:
        console.print(f"note: the load average is {log.load_before_linux[0]:.2f} before the linux runs; other "
                      "work on this machine can make the emulator late (such runs come back suspect)",
                      soft_wrap=True)
    linux_runs = chosen("linux")
    ids = [r.run_id for r in linux_runs]
    for attempt in range(retry_suspect + 1):
        inner = progress()
        watch = LoadWatch(inner) if inner is not None else None
        s = execute(p.studies["linux"], linux_runs, linux, out, jobs=1, progress=watch, versions_apart=False)
        if watch is not None and watch.loads:
            top = max(watch.loads)
            log.load_during_linux_max = max(top, log.load_during_linux_max or 0.0)
        log.executed["linux"] += s.executed
        if attempt == 0:
            log.skipped["linux"] += s.skipped
        if s.interrupted:
            log.interrupted = True
            return log
        if attempt == retry_suspect or not s.suspect:
            break
        again = set_aside_suspect(out, ids, "ccbench validate")
        if not again:
            break
        log.suspect_retried += len(again)
        if console is not None:
            console.print(f"{len(again)} linux runs came back suspect; running them again "
                          f"(retry {attempt + 1} of {retry_suspect})", soft_wrap=True)
        pause_before_retry(retry_pause_s, attempt + 1,
                           (lambda s: console.print(s, soft_wrap=True)) if console is not None else (lambda s: None))
    return log


def unfinished(out: Path, run_ids: Sequence[str]) -> list[str]:
    from ccbench.store import DB_FILENAME, Store

    if not (out / DB_FILENAME).is_file():
        return list(run_ids)
    try:
        with Store.open_existing(out) as store:
            done = store.finished_runs()
    except Exception:  # e.g. locked by a running validation: the executor will say so
        return list(run_ids)
    return [r for r in run_ids if r not in done]
