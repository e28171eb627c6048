"""Local execution: serially in this process, or in a pool of worker processes.

Only this (parent) process writes the store; workers run ``backend.run`` and
send the outcome back. Every outcome is committed as soon as it arrives;
outcomes that arrive together are committed together, in one transaction.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ccbench import degenerate
from ccbench.backends import ResultError, RunFault, RunResult
from ccbench.errors import UsageError
from ccbench.executor import signals, versions
from ccbench.executor.cluster_config import max_local_workers

if TYPE_CHECKING:
    import concurrent.futures as cf

    from ccbench.store import Store

# After Ctrl-C, how long to wait for runs already in a worker (they got the
# SIGINT too and normally stop at once) before terminating the workers.
INTERRUPT_GRACE_S = 3.0
# How long a pool with a dead worker may give nothing back before its manager
# thread counts as stuck on half a result (see _end_result_wait).
STUCK_S = 5.0


@dataclass
class Outcome:
    """What running one RunSpec gave: a result, or the error that stopped it."""

    run_id: str
    status: str  # ok | suspect | failed
    result: RunResult | None
    error: str | None
    wall_time_s: float
    repeats: bool = False  # a failure the same config meets again (RunFault.repeats)


@dataclass
class ExecutionSummary:
    total: int = 0  # runs of the study
    skipped: int = 0  # already finished before this invocation
    ok: int = 0
    suspect: int = 0
    failed: int = 0
    interrupted: bool = False
    signal: int | None = None  # SIGTERM or SIGHUP, when one (not Ctrl-C) interrupted the study
    failed_run_ids: list[str] = field(default_factory=list)
    failed_repeating: int = 0  # of the failed: fail the same way when run again (RunFault.repeats)
    out_dir: Path | None = None
    study: str | None = None  # the name the runs are stored under (``NAME v2`` for a new version)

    @property
    def executed(self) -> int:
        return self.ok + self.suspect + self.failed

    @property
    def remaining(self) -> int:
        return self.total - self.skipped - self.ok - self.suspect


class Progress:
    """Progress callbacks of :func:`execute`; the default does nothing."""

    def start(self, total: int, done: int, todo: int) -> None: ...

    def run_finished(self, runspec: Any, outcome: Outcome) -> None: ...

    def interrupted(self) -> None: ...

    def finish(self) -> None: ...


def error_text(e: BaseException) -> str:
    """``Type: message`` on the first line, then the traceback; a RunFault's
    message alone (it explains the fault, a traceback into ccbench would not)."""
    if isinstance(e, RunFault):
        return str(e).rstrip() or type(e).__name__
    head = f"{type(e).__name__}: {e}".rstrip()
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    return f"{head}\n\n{tb}".rstrip()


def _normalize(result: Any) -> RunResult:
    if isinstance(result, RunResult):  # validated again, every table of it
        result = {f.name: getattr(result, f.name) for f in dataclasses.fields(RunResult)}
    return RunResult.from_dict(result)


_in_run = False
_terminating = False


def _worker_sigint(signum: int, frame: Any) -> None:
    # Ctrl-C reaches the whole process group. Inside a run it interrupts the
    # backend (so it can clean up); an idle worker ignores it instead of
    # printing a traceback; the parent decides what happens next.
    if _in_run:
        raise KeyboardInterrupt


def _worker_sigterm(signum: int, frame: Any) -> None:
    # The parent stops the pool, or it died (the parent-death signal): a run
    # in progress is interrupted (the backend cleans up), then the worker exits.
    global _terminating
    if _in_run and not _terminating:
        _terminating = True
        raise KeyboardInterrupt
    os._exit(128 + signum)


def _worker_init(parent_pid: int | None = None) -> None:
    signal.signal(signal.SIGINT, _worker_sigint)
    signal.signal(signal.SIGTERM, _worker_sigterm)
    # started with Ctrl-C blocked (signals.sigint_blocked): one pressed while
    # it imported is handled now, by _worker_sigint, not as a traceback
    signals.unblock_sigint()
    if parent_pid is not None:
        signals.die_with_parent(parent_pid)


def run_one(backend: Any, runspec: Any, stop_flag: Any = None) -> Outcome:
    """Run one RunSpec. Any error becomes a failed Outcome; Ctrl-C propagates.
    ``stop_flag``: the backend's (``backend.stop_flag()``) for a caller that may
    have to stop the run from another thread (ClientRuns); one is made here
    otherwise.

    Module-level so a process pool can call it.
    """
    global _in_run
    t0 = time.perf_counter()
    _in_run = True
    try:
        if hasattr(backend, "stop_flag"):  # the simulator: native code in this process, stopped by its flag
            # made before the run's thread starts, so that no interruption can miss it
            flag = stop_flag if stop_flag is not None else backend.stop_flag()
            raw = signals.call_interruptibly(backend.run, runspec, flag, stop=flag.set)
        else:
            raw = backend.run(runspec)
        result = degenerate.mark(_normalize(raw), getattr(runspec, "config", None) or {})
    except (KeyboardInterrupt, SystemExit):
        if _terminating:  # a worker told to stop: its backend has cleaned up
            os._exit(128 + signal.SIGTERM)
        raise
    except BaseException as e:  # noqa: BLE001 - PyO3's PanicException is a BaseException
        return Outcome(runspec.run_id, "failed", None, error_text(e), time.perf_counter() - t0,
                       repeats=isinstance(e, RunFault) and e.repeats)
    finally:
        _in_run = False
    wall = time.perf_counter() - t0
    return Outcome(runspec.run_id, result.status, result, result.note, wall)


class _Committer:
    def __init__(self, store: Store, study_name: str, backend_name: str, index: dict[str, int],
                 summary: ExecutionSummary, progress: Progress):
        self.store = store
        self.study = study_name
        self.backend = backend_name
        self.index = index
        self.summary = summary
        self.progress = progress
        self._held: list[tuple[Any, Outcome]] | None = None  # inside together()

    def commit(self, runspec: Any, outcome: Outcome) -> None:
        if self._held is not None:
            self._held.append((runspec, outcome))
            return
        self._commit([(runspec, outcome)])

    @contextlib.contextmanager
    def together(self):
        """Hold the commits made in the block and write them in one
        transaction when it ends, also when it ends by an exception (they
        are finished runs). Writing a run costs a few statements whatever
        its rows, and a sweep of short runs is otherwise bound by them."""
        if self._held is not None:
            yield
            return
        self._held = []
        try:
            yield
        finally:
            held, self._held = self._held, None
            if held:
                self._commit(held)

    def _commit(self, done: list[tuple[Any, Outcome]]) -> None:
        try:
            done = self._write(done)
        except KeyboardInterrupt:
            # The store holds Ctrl-C until a transaction has ended and
            # delivers it then: the runs may well be saved. Count what the store holds.
            for runspec, outcome in done:
                if self.saved(runspec.run_id, outcome.status):
                    self._count(runspec, outcome)
            raise
        for runspec, outcome in done:
            self._count(runspec, outcome)

    def saved(self, run_id: str, status: str) -> bool:
        """Does the store hold this run with this outcome (an interrupted commit may have finished)?"""
        try:
            row = self.store.con.execute("SELECT status FROM runs WHERE run_id = ?", [run_id]).fetchone()
        except Exception:  # noqa: BLE001 - only for the count in a message
            return False
        return row is not None and (row[0] == status or status not in ("ok", "suspect"))

    def _run_write(self, runspec: Any, outcome: Outcome) -> Any:
        from ccbench.store import RunWrite

        return RunWrite(runspec, outcome.status, outcome.result, outcome.error, outcome.wall_time_s,
                        self.index.get(runspec.run_id))

    def _write(self, done: list[tuple[Any, Outcome]]) -> list[tuple[Any, Outcome]]:
        """Write the runs; a result that does not fit is stored as a failed run. Returns the outcomes as stored."""
        try:
            self.store.write_runs(study=self.study, backend=self.backend,
                                  runs=[self._run_write(rs, o) for rs, o in done])
            return done
        except ResultError as e:
            if len(done) > 1:  # nothing written: one at a time, to find the one that does not fit
                return [stored for d in done for stored in self._write([d])]
            runspec, outcome = done[0]
            outcome = Outcome(outcome.run_id, "failed", None, f"ResultError: {e}", outcome.wall_time_s)
            self.store.write_runs(study=self.study, backend=self.backend, runs=[self._run_write(runspec, outcome)])
            return [(runspec, outcome)]

    def _count(self, runspec: Any, outcome: Outcome) -> None:
        if outcome.status == "failed":
            self.summary.failed += 1
            self.summary.failed_run_ids.append(runspec.run_id)
            self.summary.failed_repeating += outcome.repeats
        elif outcome.status == "suspect":
            self.summary.suspect += 1
        else:
            self.summary.ok += 1
        self.progress.run_finished(runspec, outcome)


def worker_count(jobs: int) -> int:
    """The ``--jobs`` value as a number of worker processes (0 = one per CPU)."""
    if jobs < 0 or jobs > max_local_workers():
        raise UsageError(f"--jobs: got {jobs}; expected a number of worker processes from 1 to "
                         f"{max_local_workers()} (0 = one per CPU)")
    return jobs or (os.cpu_count() or 1)


def execute(
    study: Any,
    runs: Sequence[Any],
    backend: Any,
    out_dir: str | Path,
    jobs: int = 1,
    progress: Progress | None = None,
    runner: Callable[[Sequence[Any], Any, Any], None] | None = None,
    new_version: bool = False,
    versions_apart: bool = True,
) -> ExecutionSummary:
    """Run every run of ``runs`` not already finished in ``out_dir``'s store.

    ``study`` needs ``name`` (and optionally ``source_text``, ``path``);
    ``backend`` is an object from :mod:`ccbench.backends`. Runs go serially
    in this process when ``jobs == 1``, else in a process pool of ``jobs``
    workers. Each outcome is committed as it arrives; a run that raises is
    recorded as failed and the study continues.

    On Ctrl-C (KeyboardInterrupt, also one raised by a backend) nothing new
    is started, runs not yet started are dropped, what was committed stays,
    and the summary comes back with ``interrupted=True`` — the caller tells
    the user how to resume and exits 130.

    A directory holding runs of an earlier version of the study (see
    :mod:`ccbench.executor.versions`) is refused unless ``new_version``;
    ``versions_apart=False`` lets runs of several versions share the study
    (``ccbench validate``, whose grids pick their own runs out of one directory).

    ``runner(todo, backend, committer)``, when given, runs the runs instead
    (the Dask executor, :mod:`ccbench.executor.cluster`); ``jobs`` is then unused.
    """
    # here, not at the top: a pool worker imports this module for run_one and
    # has no use for the store (DuckDB and pyarrow: a quarter second of CPU)
    from ccbench.store import Store

    if jobs < 1:
        raise ValueError("jobs must be >= 1")
    progress = progress or Progress()
    out_dir = Path(out_dir)
    summary = ExecutionSummary(total=len(runs), out_dir=out_dir)
    index = {r.run_id: i for i, r in enumerate(runs)}
    backend_name = getattr(backend, "name", type(backend).__name__)
    with Store(out_dir) as store, signals.terminate_as_interrupt() as termination:
        # ccbench.spec puts the backend into the run id, so sim and linux runs
        # of one study can share a directory. A run id stored from another
        # backend would be skipped as finished or overwritten: refuse.
        others = store.other_backend_runs(index, backend_name)
        if others:
            other = sorted(set(others.values()))[0]
            raise UsageError(
                f"{out_dir} already holds {other} results of study '{study.name}'; "
                f"write {backend_name} results to another directory (--out)"
            )
        name = (versions.choose(store, study.name, backend_name, index, new_version, out_dir,
                                {r.run_id: r.config for r in runs})
                if versions_apart else study.name)
        summary.study = name
        store.record_study(name, getattr(study, "source_text", None), getattr(study, "path", None),
                           getattr(study, "profile", None))
        finished = store.finished_runs()
        todo = [r for r in runs if r.run_id not in finished]
        summary.skipped = len(runs) - len(todo)
        committer = _Committer(store, name, backend_name, index, summary, progress)
        try:
            progress.start(len(runs), summary.skipped, len(todo))  # a Ctrl-C while it prints is this sweep's
            if runner is not None:
                runner(todo, backend, committer)
            elif jobs == 1 or len(todo) <= 1:
                _serial(todo, backend, committer)
            else:
                _pool(todo, backend, committer, jobs, termination)
        except KeyboardInterrupt:
            summary.interrupted = True
            summary.signal = termination.signum
            progress.interrupted()
        except SystemExit as e:
            # The linux backend turns SIGTERM/SIGHUP during a run into its own
            # SystemExit (Terminated, with .signum) after tearing the run down.
            if getattr(e, "signum", None) not in signals.TERMINATING:
                raise
            summary.interrupted = True
            summary.signal = e.signum  # type: ignore[attr-defined]
            progress.interrupted()
        finally:
            progress.finish()
    return summary


def _serial(todo: Sequence[Any], backend: Any, committer: _Committer) -> None:
    for runspec in todo:
        committer.commit(runspec, run_one(backend, runspec))


def _pool(todo: Sequence[Any], backend: Any, committer: _Committer, jobs: int,
          termination: signals.Termination | None = None) -> None:
    # Imported here: a serial sweep (the common case) starts without them.
    import concurrent.futures as cf
    import multiprocessing

    # spawn, not fork: the parent holds a DuckDB connection and its threads.
    ctx = multiprocessing.get_context("spawn")
    queue = list(reversed(todo))  # pop() from the end = study order
    while queue:
        pool = cf.ProcessPoolExecutor(max_workers=min(jobs, len(queue)), mp_context=ctx,
                                      initializer=_worker_init, initargs=(os.getpid(),))
        inflight: dict[cf.Future, Any] = {}
        ready: list[tuple[cf.Future, Any]] = []  # came back, not committed yet
        broken = False

        def fill() -> None:
            # Keep at most `jobs` runs in the pool: nothing queued beyond
            # what is running, so an interruption drops nothing started.
            nonlocal broken
            while queue and len(inflight) < jobs and not broken:
                rs = queue[-1]
                try:
                    with signals.sigint_blocked():  # a worker it starts inherits the mask (_worker_init)
                        fut = pool.submit(run_one, backend, rs)
                except cf.process.BrokenProcessPool:
                    broken = True  # noticed before the failed futures came back
                    break
                inflight[fut] = queue.pop()

        try:
            while queue or inflight:
                fill()
                if not inflight:
                    break
                done = _wait_first(pool, inflight)
                ready = [(fut, inflight.pop(fut)) for fut in done]
                # the freed workers get their next runs before the commits,
                # which would otherwise leave them idle (not after a crash or Ctrl-C)
                if all(fut.exception() is None for fut, _ in ready):
                    fill()
                with committer.together():
                    while ready:
                        fut, rs = ready[0]
                        exc = fut.exception()
                        if exc is None:
                            committer.commit(rs, fut.result())
                        elif isinstance(exc, KeyboardInterrupt):
                            raise KeyboardInterrupt
                        elif isinstance(exc, cf.process.BrokenProcessPool):
                            broken = True
                            committer.commit(rs, Outcome(
                                rs.run_id, "failed", None,
                                "worker process died while this run was in it (a crash in the backend or "
                                f"out of memory); it is retried on the next invocation ({exc})", 0.0))
                        else:  # e.g. the runspec or result could not be pickled
                            committer.commit(rs, Outcome(rs.run_id, "failed", None, error_text(exc), 0.0))
                        ready.pop(0)
                if broken and not inflight:
                    break  # start a fresh pool for the rest
            pool.shutdown(wait=True)
        except KeyboardInterrupt:
            _stop_pool(pool, inflight, committer, forward=termination is not None and termination.signum is not None,
                       ready=ready)
            raise
        except BaseException:
            _stop_pool(pool, inflight, None)
            raise


def _workers(pool: cf.ProcessPoolExecutor) -> list[Any]:
    return list((getattr(pool, "_processes", None) or {}).values())


def _end_workers(procs: list[Any], grace_s: float) -> None:
    """SIGTERM the workers still alive (one in a run interrupts it and lets
    its backend clean up), then kill any that has not exited after ``grace_s``."""
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=grace_s)
        if p.is_alive():
            p.kill()
            p.join(timeout=2.0)


def _end_result_wait(pool: cf.ProcessPoolExecutor) -> None:
    """A worker that died in the middle of sending a result (killed by a
    signal, or out of memory) leaves part of a message in the pool's result
    pipe; the pool's manager thread then waits for the rest for ever: no
    future completes, not even as broken, and shutdown hangs with it. With
    every worker gone, closing this process's writing end of the pipe ends
    that wait: the read meets the end of the file, and the pool counts as
    broken."""
    if not any(p.is_alive() for p in _workers(pool)):
        writer = getattr(getattr(pool, "_result_queue", None), "_writer", None)
        if writer is not None:
            writer.close()


def _wait_first(pool: cf.ProcessPoolExecutor, inflight: dict[cf.Future, Any]) -> set[cf.Future]:
    """The futures done first (`cf.wait` with FIRST_COMPLETED), except that a
    pool stuck on half a result is broken open: a worker that died is
    noticed at once unless the manager thread is stuck, so when one has died
    and nothing has come back for STUCK_S, the other workers are stopped as
    the pool itself stops them when broken, and its wait is ended."""
    import concurrent.futures as cf

    while True:
        done, _ = cf.wait(inflight, timeout=STUCK_S, return_when=cf.FIRST_COMPLETED)
        if done:
            return done
        procs = _workers(pool)
        if all(p.is_alive() for p in procs):
            continue
        _end_workers(procs, INTERRUPT_GRACE_S)
        _end_result_wait(pool)


def _stop_pool(pool: cf.ProcessPoolExecutor, inflight: dict[cf.Future, Any], committer: _Committer | None,
               forward: bool = False, ready: Sequence[tuple[cf.Future, Any]] = ()) -> None:
    """Stop after Ctrl-C: give running runs a moment, keep any that finished
    (``ready``: back before the interruption, not yet committed), then
    terminate the workers. ``forward``: the interruption was a SIGTERM or
    SIGHUP to this process alone; interrupt the workers' runs like Ctrl-C does."""
    import concurrent.futures as cf

    for fut in inflight:
        fut.cancel()
    procs = _workers(pool)
    if forward:
        # SIGTERM, not SIGINT: a worker still starting up (no handlers yet) just exits;
        # one in a run interrupts it like Ctrl-C, lets the backend clean up and exits.
        for p in procs:
            if p.is_alive() and p.pid is not None:
                try:
                    os.kill(p.pid, signal.SIGTERM)
                except OSError:
                    pass
    if committer is not None and (inflight or ready):
        try:
            for fut, rs in ready:
                # the first may have been committed when Ctrl-C came: the store
                # delivers it only after the run's transaction
                if fut.exception() is None and not committer.saved(rs.run_id, fut.result().status):
                    committer.commit(rs, fut.result())
            done, _ = cf.wait(inflight, timeout=INTERRUPT_GRACE_S)
            for fut in done:
                if not fut.cancelled() and fut.exception() is None:
                    committer.commit(inflight[fut], fut.result())
        except KeyboardInterrupt:
            pass  # a second Ctrl-C: stop now
    _end_workers(procs, 2.0)
    # The forwarded SIGTERM can stop a worker in the middle of sending a result.
    _end_result_wait(pool)
    pool.shutdown(wait=True, cancel_futures=True)
