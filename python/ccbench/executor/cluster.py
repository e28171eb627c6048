"""Running a study's runs on a Dask cluster (``ccbench run --cluster``).

The client (the process that ran ``ccbench run``) stays the only writer of
the results store: workers run ``backend.run`` and send the outcome back, the
result tables as Arrow IPC streams (not JSON text), and the client commits
each run the moment its result returns, with any others that returned
meanwhile in the same transaction, through the same committer as local
runs (:func:`ccbench.executor.local.execute` with a ``runner``).

Order of work, so that bad input costs nothing:

1. :func:`open_cluster` starts or reaches the cluster (LocalCluster, a
   scheduler address, or dask-jobqueue batch jobs, whose job script is
   checked by the batch system first) — any problem is a UsageError;
2. :func:`preflight` asks every worker which ccbench and which compiled core
   (sha256 of the ``_core`` library) it has, and for the linux backend
   whether it can run linux runs — any problem is one UsageError naming the
   worker;
3. only then the store is opened and the runs go out.

Meanwhile, for a LocalCluster and sim runs, the client runs the first runs
itself (:class:`ClientRuns`); they are committed after step 2, or dropped.

A worker that dies mid-run costs only that run: the scheduler reports the
task as lost (``KilledWorker``; clusters ccbench starts itself get
``distributed.scheduler.allowed-failures = 0`` so the decision is ccbench's),
and the run is submitted again under a new key, up to ``retries`` more
times, then recorded as failed with the reason. A run the dead worker held
but had not started (each task announces its start, :func:`_announce_start`)
goes out again without counting as a try. A run is committed at most
once per invocation whatever comes back late.

Linux runs ask for the worker resource ``ccbench-linux=1`` (each worker
offers one, so it runs one linux run at a time) and take a machine-wide lock
(``/run/ccbench/linux-runs.lock``), so two workers on one host never run
linux runs at the same time. A worker killed in a linux run leaves its
processes and namespaces: the host's next linux run removes them first, and
after a sweep that lost one every worker clears its host
(:func:`clear_dead_linux_runs`); each removal is reported.

Ctrl-C: every worker is told to start no more runs of this sweep and to
interrupt the linux runs it is in (they clean up as on a local Ctrl-C); runs
that finish within the grace period are committed, the rest are cancelled,
and the workers are left idle.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import logging
import os
import queue as _queue
import shutil
import signal
import subprocess
import threading
import time
import uuid
from typing import Any, Callable, Optional, Sequence

import pyarrow as pa

from ccbench import bpf, tempdirs
from ccbench.backends import RunResult
from ccbench.errors import UsageError
from ccbench.executor import cluster_probe, signals
from ccbench.executor.cluster_config import ClusterConfig
from ccbench.executor.local import INTERRUPT_GRACE_S, Outcome, error_text, run_one

LINUX_RESOURCE = "ccbench-linux"
LINUX_LOCK = "/run/ccbench/linux-runs.lock"
CONNECT_TIMEOUT_S = 5.0
HANDSHAKE_TIMEOUT_S = 15.0  # connecting and the handshake: a scheduler answers in well under a second
WORKER_WAIT_S = 30.0  # a scheduler without workers: how long to wait for one
NO_WORKER_NOTE_S = 30.0  # every worker gone mid-sweep: say so after this long
RESULT_FETCH_S = 10.0  # a finished run's result: fetched within this, or its worker died meanwhile
# A batch job starts its worker processes together; once one is up, the
# others of that job get this long to connect before runs go out, so the
# first runs spread over the whole job instead of queueing on one worker.
JOB_SIBLINGS_WAIT_S = 20.0
STOP_TIMEOUT_S = 5.0  # how long telling the workers to stop may take
LINUX_STOP_GRACE_S = 30.0  # how long interrupted linux runs may take to clean up
MAX_REQUEUES = 3  # a run whose start never reached the client, sent out again uncounted
CLEAR_TIMEOUT_S = 60.0  # how long the workers may take to clear what dead linux runs left


# ---------------------------------------------------------------- results on the wire


_NOT_TABLES = {"flows", "stats", "status", "note"}


def _table_fields() -> list[str]:
    """The column-table fields of RunResult (samples, queue, rpcs, ...)."""
    return [f.name for f in dataclasses.fields(RunResult) if f.name not in _NOT_TABLES]


def to_wire(outcome: Outcome) -> dict:
    """An Outcome for the trip to the client: each result table one Arrow IPC stream."""
    from ccbench.store import arrow_column

    d: dict[str, Any] = {"run_id": outcome.run_id, "status": outcome.status, "error": outcome.error,
                         "wall_time_s": outcome.wall_time_s, "repeats": outcome.repeats, "result": None}
    r = outcome.result
    if r is None:
        return d
    tables = {}
    for name in _table_fields():
        cols = getattr(r, name) or {}
        if not cols:
            continue
        table = pa.table({c: arrow_column(name, c, v) for c, v in cols.items()})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        tables[name] = sink.getvalue()
    d["result"] = {"flows": r.flows, "stats": r.stats, "status": r.status, "note": r.note, "tables": tables}
    return d


def from_wire(d: dict) -> Outcome:
    """The Outcome again; result columns are Arrow arrays (the store takes them as they are)."""
    r = d["result"]
    result = None
    if r is not None:
        tables: dict[str, dict] = {}
        for name, buf in r["tables"].items():
            t = pa.ipc.open_stream(buf).read_all()
            tables[name] = {c: t.column(c).combine_chunks() for c in t.column_names}
        result = RunResult(flows=r["flows"], stats=r["stats"], status=r["status"], note=r["note"], **tables)
    return Outcome(d["run_id"], d["status"], result, d["error"], d["wall_time_s"], d["repeats"])


# ---------------------------------------------------------------- on the worker


_IDENTITY: Optional[dict] = None
_RUNNING_LOCK = threading.Lock()
_RUNNING: dict[int, tuple[str, bool]] = {}  # thread id → (sweep, interruptible)
_STOPPED: set[str] = set()  # sweeps told to stop


def _identity() -> dict:
    global _IDENTITY
    if _IDENTITY is None:
        _IDENTITY = cluster_probe.identity()
    return _IDENTITY


@contextlib.contextmanager
def machine_lock(path: str = LINUX_LOCK):
    """One linux run at a time on this machine, whichever worker runs it."""
    import fcntl

    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        while True:  # polled, not blocking: a stop (stop_sweep) can interrupt the wait
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # releases the lock


def _set_async_exc(tid: int, exc: Any) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(tid), ctypes.py_object(exc) if exc else None)


def run_task(backend: Any, runspec: Any, expect: tuple, sweep: str, linux: bool) -> tuple:
    """One run on a worker: (kind, payload, notes), kind "done" with the wire
    outcome | "mismatch" with the worker's identity | "interrupted" with None;
    notes: lines for the user (what dead runs left on the host, removed)."""
    me = _identity()
    if (me["version"], me["core"]) != tuple(expect):
        return ("mismatch", me, [])
    tid = threading.get_ident()
    notes: list[str] = []
    try:
        with _RUNNING_LOCK:
            if sweep in _STOPPED:
                return ("interrupted", None, [])
            _RUNNING[tid] = (sweep, linux)
        _announce_start(sweep)
        try:
            if linux:
                with machine_lock():
                    # A worker killed in a linux run leaves its processes sending and
                    # its namespaces behind: not next to this run's measurement.
                    notes = [f"{_worker_host()}: {line}" for line in clear_dead_linux_runs()]
                    outcome = run_one(backend, runspec)
            else:
                outcome = run_one(backend, runspec)
        finally:
            with _RUNNING_LOCK:
                _RUNNING.pop(tid, None)
                _set_async_exc(tid, None)  # drop a stop that came too late to matter
        return ("done", to_wire(outcome), notes)
    except KeyboardInterrupt:
        return ("interrupted", None, notes)


def started_topic(sweep: str) -> str:
    return f"ccbench-started-{sweep}"


def _announce_start(sweep: str) -> None:
    """Tell the client this task runs now: a worker that dies holding a task
    it had not started costs that run nothing (ClusterRunner._handle)."""
    with contextlib.suppress(ImportError, ValueError):  # ValueError: not in a worker
        from distributed import get_worker

        w = get_worker()
        w.log_event(started_topic(sweep), w.get_current_task())


def _address_host(address: str) -> str:
    """``tcp://10.0.0.5:8786`` → ``10.0.0.5``."""
    return address.split("://", 1)[-1].rsplit(":", 1)[0]


def _worker_host() -> str:
    try:
        from distributed import get_worker

        return _address_host(get_worker().address)
    except (ImportError, ValueError):  # not in a worker
        return "this host"


def clear_dead_linux_runs() -> list[str]:
    """On a worker: remove what linux runs whose process died (a killed
    worker's) left on this host; runs in progress are left alone. Returns a
    line per thing removed and per problem."""
    from ccbench.backends.linux.backend import remove_dead_runs

    try:
        removed, problems = remove_dead_runs()
    except OSError as e:  # said, not a reason to fail the run that asked
        return [f"could not look for what dead runs left: {e}"]
    return removed + [f"could not clean up: {p}" for p in problems]


def stop_sweep(sweep: str) -> int:
    """On every worker (client.run): start no more runs of ``sweep``; interrupt
    its linux runs in progress (a sim run finishes: it is short and pure).
    Returns the number of runs interrupted."""
    n = 0
    with _RUNNING_LOCK:
        _STOPPED.add(sweep)
        for tid, (s, interruptible) in _RUNNING.items():
            if s == sweep and interruptible:
                _set_async_exc(tid, KeyboardInterrupt)
                n += 1
    return n


def own_process_group() -> int:
    """On a LocalCluster's workers and nannies (client.run): leave the
    terminal's process group, so Ctrl-C reaches only the client, which stops
    the sweep in order (stop_sweep) instead of every process at once."""
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    return os.getpgrp()


def linux_problems(ccas: Sequence[str], dask_worker: Any = None) -> list[str]:
    """What keeps this worker from running the study's linux runs."""
    from ccbench.backends.linux.backend import core_problem, environment_problems
    from ccbench.spec import kernel

    problems = environment_problems()
    core = core_problem()
    if core:
        problems.append(core)
    have = kernel.available() or []
    missing = [c for c in ccas if c not in have]
    if missing:
        problems.append(f"its kernel has no congestion control {', '.join(missing)} (available: {', '.join(have)})")
    if dask_worker is not None:
        res = dict(dask_worker.state.total_resources)
        if res.get(LINUX_RESOURCE, 0) < 1:
            problems.append(f"it offers no resource {LINUX_RESOURCE} (start it with "
                            f"`dask worker ... --nthreads 1 --resources {LINUX_RESOURCE}=1`)")
    return problems


# ---------------------------------------------------------------- the cluster


def _dask() -> Any:
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise UsageError("--cluster needs Dask: pip install 'ccbench[cluster]' "
                         "(dask, distributed and dask-jobqueue)") from None
    import distributed

    return distributed


class ClusterHandle:
    """A connected Dask client, and the cluster object when ccbench started it."""

    def __init__(self, cfg: ClusterConfig, client: Any, cluster: Any = None, scratch: Any = None):
        self.cfg = cfg
        self.client = client
        self.cluster = cluster
        self.scratch = scratch  # a LocalCluster's scratch space (tempdirs "dask"), removed on close

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close(timeout=5)
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                self.cluster.close(timeout=10)
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> "ClusterHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _reason(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def _quiet_logs() -> None:
    for name in ("distributed", "distributed.worker", "distributed.scheduler", "distributed.nanny",
                 "distributed.core", "distributed.comm", "distributed.batched", "dask_jobqueue",
                 "distributed.deploy", "distributed.client", "tornado"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


# Dask settings of the clusters ccbench starts itself (LocalCluster, batch jobs).
OWN_CONFIG = {
    "distributed.scheduler.allowed-failures": 0,  # a lost run is ccbench's to retry (ClusterRunner)
    "distributed.admin.tick.limit": "1h",  # a long linux run is no hang
    # Dask's own instruments cost CPU the runs need. On 2 cores an idle
    # local:2 cluster took 177 ms of CPU a second with Dask's defaults and 20 ms
    # with these (bench/sweep_scale.py --idle-cost): every scheduler, nanny and worker
    # times its event loop 50 times a second (only a health metric here: the
    # limit above never fires), the profiler samples each busy worker 100 times
    # a second for a dashboard nobody opens, the system monitor polls psutil
    # (CPU, memory, network, disk) twice a second and the memory monitor 10 times.
    "distributed.admin.tick.interval": "1s",
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.admin.system-monitor.disk": False,
    "distributed.worker.memory.monitor-interval": "1s",  # the nanny's memory limit still holds
}


def env_of(config: dict) -> dict[str, str]:
    """``config`` as the environment variables a ``dask worker`` reads (DASK_A__B_C)."""
    def name(key: str) -> str:
        return "DASK_" + "__".join(part.upper().replace("-", "_") for part in key.split("."))

    return {name(k): str(v) for k, v in config.items()}


def _local_start_method() -> dict:
    """On Linux the LocalCluster's workers are forked from this process.

    A spawned worker is a fresh interpreter that imports Dask, pyarrow,
    pandas and ccbench (and this program's main module) again: about a second
    of CPU each, most of the cluster's start-up on a small machine. A forked
    one has them all already. Dask supports forking its workers (the
    ``distributed.worker.multiprocessing-method`` setting); the child is a
    copy of the thread that forks and runs only Dask's worker code. Forking
    happens before the store is opened (no DuckDB threads or files yet). The
    setting holds while the cluster starts only: a worker that Dask restarts
    later (after one died) is spawned as usual. Elsewhere (macOS, where fork
    is unsafe) Dask's default."""
    import sys

    if not sys.platform.startswith("linux"):
        return {}
    # pyarrow imports pandas on its first conversion (a result's columns), in
    # this process and in each worker: import it once, before the fork.
    import pandas  # noqa: F401

    return {"distributed.worker.multiprocessing-method": "fork"}


#: A Dask scheduler opens a connection with its handshake, at once: a frame
#: whose first 8 bytes are its length (little-endian), a few dozen bytes.
_HANDSHAKE_MAX = 1 << 20


def _not_dask(address: str) -> Optional[str]:
    """Why the server at a ``tcp://`` address is not a Dask scheduler, judged
    by what it sends first, before any Dask client is made: an SSH or mail
    server's banner, a proxy's HTTP reply to the client's handshake (Dask's
    client read such text as a frame length and failed with MemoryError,
    leaving a half-made client that printed a traceback after 10 s), or
    nothing within HANDSHAKE_TIMEOUT_S (a web server waiting for a request).
    None if it sends a Dask handshake, or cannot be reached (the client says
    why)."""
    import socket
    from urllib.parse import urlsplit

    try:
        u = urlsplit(address)
        if u.scheme != "tcp" or not u.hostname or u.port is None:
            return None
        sock = socket.create_connection((u.hostname, u.port), timeout=CONNECT_TIMEOUT_S)
    except (OSError, ValueError):  # unreachable or a malformed port: the client says it
        return None
    with sock:
        try:
            sock.settimeout(HANDSHAKE_TIMEOUT_S)
            first = b""
            while len(first) < 8:
                chunk = sock.recv(8 - len(first))
                if not chunk:
                    return "it closed the connection"
                first += chunk
        except TimeoutError:
            return f"it said nothing within {HANDSHAKE_TIMEOUT_S:.0f} s"
        except OSError as e:
            return f"it dropped the connection: {_reason(e)}"
        if int.from_bytes(first, "little") <= _HANDSHAKE_MAX:
            return None
        with contextlib.suppress(OSError):  # the rest of its first line, to name it
            sock.settimeout(0.2)
            first += sock.recv(72)
    line = first.decode("ascii", "replace").splitlines()[0][:80]
    return "it sent '" + "".join(c if c.isprintable() else "?" for c in line) + "', not Dask's handshake"


def _connect(distributed: Any, address: str, named: str) -> Any:
    """A client of the scheduler at ``address``, or one UsageError. Dask's
    connect timeout does not bound its handshake: something else listening
    there (a web server) kept it waiting for good, or had it read a length
    of exabytes. So what the server says first is looked at before any
    client is made, and the client is made in a thread, waited for a bounded time."""
    why = _not_dask(address)
    if why is not None:
        raise UsageError(f"{named}: {address} did not answer as a Dask scheduler ({why}; is a Dask scheduler "
                         "listening there? `dask scheduler` listens on port 8786 unless told otherwise)")
    box: dict[str, Any] = {}

    def connect() -> None:
        try:
            box["client"] = distributed.Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
        except Exception as e:  # noqa: BLE001 - handed to the caller
            box["error"] = e

    t = threading.Thread(target=connect, name="ccbench-connect", daemon=True)
    t.start()
    t.join(HANDSHAKE_TIMEOUT_S)
    if t.is_alive():
        raise UsageError(f"{named}: {address} did not answer as a Dask scheduler within {HANDSHAKE_TIMEOUT_S:.0f} s "
                         "(is a Dask scheduler listening there?)")
    e = box.get("error")
    if isinstance(e, ValueError):
        raise UsageError(f"{named}: not a usable scheduler address {address!r} ({e})") from None
    if isinstance(e, (OSError, TimeoutError)):
        raise UsageError(f"{named}: cannot reach the Dask scheduler at {address} ({_reason(e)})") from None
    if e is not None:
        raise UsageError(f"{named}: {address} did not answer as a Dask scheduler ({type(e).__name__})") from None
    return box["client"]


def open_cluster(cfg: ClusterConfig, status: Callable[[str], None] = lambda s: None) -> ClusterHandle:
    """Start or reach the cluster of ``cfg``; UsageError (exit 2) when it cannot be."""
    distributed = _dask()
    import dask

    _quiet_logs()
    own = dict(OWN_CONFIG)
    if cfg.kind == "tcp":
        client = _connect(distributed, cfg.address, cfg.named)
        handle = ClusterHandle(cfg, client)
        try:
            _wait_for_workers(handle, WORKER_WAIT_S, status)
        except BaseException:
            handle.close()
            raise
        return handle
    if cfg.kind == "local":
        # Dask's scratch space (its lock files, the workers' directories) in
        # a directory of ccbench's own, not in $TMPDIR/dask-scratch-space for
        # good; one left by a killed client goes with the next cluster's start.
        try:
            scratch = tempdirs.make("dask")
        except OSError as e:
            raise UsageError(f"{cfg.named}: no temporary directory for Dask ({e})") from None
        with dask.config.set({**own, **_local_start_method(), "temporary-directory": str(scratch)}):
            try:
                cluster = distributed.LocalCluster(
                    n_workers=cfg.workers, threads_per_worker=1, processes=True, dashboard_address=None,
                    resources={LINUX_RESOURCE: 1}, silence_logs=logging.CRITICAL, host="127.0.0.1",
                    # no dashboard; its small HTTP server on any free port, not 8787
                    scheduler_kwargs={"dashboard_address": "127.0.0.1:0"})
            except (RuntimeError, OSError, TimeoutError) as e:
                shutil.rmtree(scratch, ignore_errors=True)
                raise UsageError(f"{cfg.named}: the local Dask cluster did not start "
                                 f"({_reason(e)})") from None
            except BaseException:
                shutil.rmtree(scratch, ignore_errors=True)
                raise
        # Results straight from the worker that has them (one hop, not relayed
        # through the scheduler): the workers listen on this machine.
        try:
            client = distributed.Client(cluster, set_as_default=False, direct_to_workers=True)
        except BaseException:
            cluster.close()
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        handle = ClusterHandle(cfg, client, cluster, scratch)
        try:
            _wait_for_workers(handle, None, status, want=cfg.workers)
            client.run(own_process_group, nanny=True)
            client.run(own_process_group)
            # The workers are this process's children (their nannies live
            # here). Forked ones share every inherited descriptor, so Dask's
            # own parent watch can miss this process's death (a SIGKILLed
            # client left both workers running): the kernel's parent-death
            # signal ends them instead.
            client.run(signals.die_with_parent, os.getpid())
        except BaseException:
            handle.close()
            raise
        return handle
    return _open_batch(cfg, own, status)


def _batch_cluster_class(kind: str, named: str) -> Any:
    # Importing dask_jobqueue makes Ctrl-C call sys.exit() (its runner module
    # sets a SIGINT handler): ccbench's own handling, KeyboardInterrupt and
    # exit 130 with the resume line, must stay.
    handler = signal.getsignal(signal.SIGINT)
    try:
        import dask_jobqueue
    except ImportError:
        raise UsageError(f"{named} needs dask-jobqueue: pip install 'ccbench[cluster]'") from None
    finally:
        if threading.current_thread() is threading.main_thread() and handler is not None:
            signal.signal(signal.SIGINT, handler)
    return {"slurm": dask_jobqueue.SLURMCluster, "pbs": dask_jobqueue.PBSCluster,
            "sge": dask_jobqueue.SGECluster}[kind]


_SUBMIT = {"slurm": "sbatch", "pbs": "qsub", "sge": "qsub"}


def _check_job_script(kind: str, script: str, named: str) -> None:
    """Let the batch system judge the job before any job exists."""
    cmd = _SUBMIT[kind]
    if shutil.which(cmd) is None:
        raise UsageError(f"{named}: `{cmd}` is not on PATH (is this a {kind} submit host?)")
    if kind == "slurm":
        argv = ["sbatch", "--test-only"]
    elif kind == "sge":
        argv = ["qsub", "-w", "v"]
    else:
        return  # PBS has no dry run; a rejected job is reported when submitted
    try:
        p = subprocess.run(argv, input=script, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UsageError(f"{named}: {' '.join(argv)} failed ({_reason(e)})") from None
    if p.returncode != 0:
        msg = " ".join((p.stderr or p.stdout).split()) or f"exit status {p.returncode}"
        raise UsageError(f"{named}: {cmd} rejected the worker job: {msg}")


def _open_batch(cfg: ClusterConfig, own: dict, status: Callable[[str], None]) -> ClusterHandle:
    distributed = _dask()
    import dask

    cls = _batch_cluster_class(cfg.kind, cfg.named)
    kw: dict[str, Any] = dict(
        cores=cfg.cores, processes=cfg.cores, memory=cfg.memory, walltime=cfg.walltime,
        queue=cfg.queue, account=cfg.account,
        # PBS and SGE jobs inherit the submitting environment only when asked (Slurm does by default)
        job_extra_directives=(["-V"] if cfg.kind in ("pbs", "sge") else []) + list(cfg.job_extra),
        worker_extra_args=["--resources", f"{LINUX_RESOURCE}=1"],
        # the workers' share of OWN_CONFIG: a batch job reads Dask settings from its environment
        job_script_prologue=[f"export {k}={v}" for k, v in env_of(OWN_CONFIG).items()],
        # None meant Dask's default, :8787 on every interface (a warning when taken, as on a
        # shared login node): the scheduler's small HTTP server on a free loopback port instead
        scheduler_options={"dashboard_address": "127.0.0.1:0"},
        log_directory=cfg.log_directory, silence_logs="critical",
        name=f"ccbench-{os.getpid()}",
    )
    if cfg.kind == "sge":
        kw.pop("account")
        kw["project"] = cfg.account
    if cfg.kind == "pbs":
        kw["resource_spec"] = None
    with dask.config.set(own):
        try:
            cluster = cls(**{k: v for k, v in kw.items() if v is not None})
        except (ValueError, TypeError, OSError) as e:
            raise UsageError(f"{cfg.named}: {_reason(e)}") from None
        try:
            _check_job_script(cfg.kind, cluster.job_script(), cfg.named)
            cluster.scale(jobs=cfg.jobs)
            # Submit now and surface the batch system's refusal as ours.
            corrector = getattr(cluster, "_correct_state", None)
            if corrector is not None:
                try:
                    cluster.sync(corrector)
                except RuntimeError as e:
                    raise UsageError(f"{cfg.named}: the batch system refused the worker job: "
                                     + " ".join(str(e).split())) from None
            client = distributed.Client(cluster, set_as_default=False)
        except BaseException:
            with contextlib.suppress(Exception):
                cluster.close(timeout=10)
            raise
    handle = ClusterHandle(cfg, client, cluster)
    try:
        _wait_for_workers(handle, None, status, jobs=True)
        _wait_for_workers(handle, JOB_SIBLINGS_WAIT_S, lambda _: None, want=cfg.cores, soft=True)
    except BaseException:
        handle.close()
        raise
    return handle


def _n_workers(client: Any) -> int:
    return len(client.scheduler_info(n_workers=-1).get("workers", {}))


def _wait_for_workers(handle: ClusterHandle, timeout: Optional[float], status: Callable[[str], None],
                      want: int = 1, jobs: bool = False, soft: bool = False) -> None:
    """Until `want` workers are up. Past `timeout`: a UsageError, or, if
    `soft`, go on with the workers there are."""
    t0 = time.monotonic()
    said = False
    while _n_workers(handle.client) < want:
        if timeout is not None and time.monotonic() - t0 > timeout:
            if soft:
                return
            raise UsageError(f"{handle.cfg.named}: no worker connected to the Dask scheduler at {handle.cfg.address} "
                             f"within {timeout:.0f} s (start some: dask worker {handle.cfg.address})")
        if not said and time.monotonic() - t0 > 1.0:
            status(f"waiting for {'the batch jobs to start' if jobs else 'workers'} ({handle.cfg.describe()})")
            said = True
        time.sleep(0.2)


def client_identity() -> dict:
    return cluster_probe.identity()


def preflight(handle: ClusterHandle, backend_name: str, ccas: Sequence[str]) -> dict[str, dict]:
    """Check every worker before a run starts; UsageError naming the first bad one."""
    import cloudpickle

    me = client_identity()
    if me["problem"] or not me["core"]:
        raise UsageError(f"this ccbench cannot be identified: {me['problem'] or 'no compiled core'}")
    cloudpickle.register_pickle_by_value(cluster_probe)
    try:
        infos = handle.client.run(cluster_probe.identity, on_error="return")
    finally:
        cloudpickle.unregister_pickle_by_value(cluster_probe)
    mine = f"ccbench {me['version']} (core {me['core']}) from {me['package']}"
    named = handle.cfg.named
    for addr, info in sorted(infos.items()):
        if isinstance(info, BaseException):
            raise UsageError(f"{named}: worker {addr} did not answer the version check ({_reason(info)})")
        where = f"worker {addr} (host {info['host']}, pid {info['pid']})"
        if info["problem"]:
            raise UsageError(f"{named}: {where} cannot import ccbench ({info['problem']}); "
                             f"this client runs {mine}")
        if (info["version"], info["core"]) != (me["version"], me["core"]):
            raise UsageError(
                f"{named}: {where} runs ccbench {info['version']} (core {info['core']}) from "
                f"{info['package']}; this client runs {mine}: install the same ccbench on every worker")
    if backend_name == "linux":
        probs = handle.client.run(linux_problems, list(ccas), on_error="return")
        for addr, p in sorted(probs.items()):
            if isinstance(p, BaseException):
                raise UsageError(f"{named}: worker {addr}: the linux backend check failed ({_reason(p)})")
            if p:
                raise UsageError(f"{named}: worker {addr} cannot run linux runs: " + "; ".join(p))
    return infos


class _Stop(Exception):
    """A worker of another ccbench joined mid-sweep."""


class ClientRuns:
    """Runs the client does itself while its LocalCluster starts.

    Importing Dask and starting the workers takes about a second, mostly on
    one core: meanwhile a thread of the client takes runs in study order.
    Once the cluster is up and checked, ``stop_taking`` ends that; the runner
    commits what the thread finished, leaves the run it is in (at most one)
    out of what goes to the workers and commits it when it ends. Nothing is
    committed before the cluster passed its check: on a bad cluster or Ctrl-C
    during the start-up the thread's results are dropped (nothing written).
    """

    def __init__(self, backend: Any, runs: Sequence[Any]):
        self.backend = backend
        self._runs = list(runs)
        self._lock = threading.Lock()
        self._taking = True
        self.claimed: dict[str, Any] = {}  # run id → runspec of every run the thread took
        self._finished: list[tuple[Any, Outcome]] = []
        self._deliver: Optional[Callable[[Any], None]] = None
        self._flag: Any = None  # the run in progress's stop flag (the simulator's)
        self._stopped = False
        self._thread = threading.Thread(target=self._work, name="ccbench-client-runs", daemon=True)

    def start(self) -> "ClientRuns":
        self._thread.start()
        return self

    def _work(self) -> None:
        for rs in self._runs:
            with self._lock:
                if not self._taking:
                    return
                self.claimed[rs.run_id] = rs
                flag = self._flag = self.backend.stop_flag() if hasattr(self.backend, "stop_flag") else None
            outcome = run_one(self.backend, rs, flag)  # never raises: a failed run is a failed Outcome
            with self._lock:
                if self._stopped:  # stopped (or cut short) by an interruption: dropped
                    return
                if self._deliver is not None:
                    self._deliver((rs, outcome))
                else:
                    self._finished.append((rs, outcome))

    def stop_taking(self) -> None:
        with self._lock:
            self._taking = False

    def stop(self) -> None:
        """On an interruption: take no more runs, stop the one in progress and
        wait for the thread (a thread left inside the simulator aborts the
        process when it returns while Python shuts down); what it was running
        is dropped."""
        with self._lock:
            self._taking, self._stopped, flag = False, True, self._flag
        if flag is not None:
            flag.set()
        # a second Ctrl-C does not cut the wait short: the thread must not outlive the interpreter
        deadline = time.monotonic() + signals.STOP_WAIT_S
        while self._thread.is_alive() and time.monotonic() < deadline:
            with contextlib.suppress(KeyboardInterrupt):
                self._thread.join(max(0.0, deadline - time.monotonic()))

    def hand_over(self, deliver: Callable[[Any], None]) -> list[tuple[Any, Outcome]]:
        """(runspec, outcome) of the runs finished so far; a run still going is
        given to ``deliver`` when it ends."""
        with self._lock:
            self._deliver = deliver
            done, self._finished = self._finished, []
            return done


def early_runs_fit(cfg: ClusterConfig, backend: Any, runs: Sequence[Any], out_dir: Any) -> bool:
    """Whether the client may run runs itself while the cluster starts.

    Only a LocalCluster (seconds to start, and failing rarely), only pure
    runs (the simulator: a dropped one costs nothing), only into a new
    results directory (nothing to resume, so every run is to do), and no
    ``bpf:`` CCA: the workers are forked while a run goes on in the client,
    and the BPF object cache is the one lock a simulation takes; a worker
    forked while it is held would wait for it forever.
    """
    from pathlib import Path

    from ccbench.store import DB_FILENAME

    if cfg.kind != "local" or not hasattr(backend, "stop_flag"):
        return False
    if (Path(out_dir) / DB_FILENAME).exists():
        return False
    return not any(cca.startswith(bpf.PREFIX) for cca in _study_ccas(runs))


def _tell(committer: Any, what: str, *args: Any) -> None:
    """The progress reporter's ``what`` (``run_retried``, ``note``,
    ``cluster_status``: the Dask executor's own), if it has one."""
    report = getattr(committer.progress, what, None)
    if report is not None:
        report(*args)


class ClusterRunner:
    """``runner(todo, backend, committer)`` for :func:`ccbench.executor.local.execute`."""

    def __init__(self, handle: ClusterHandle, backend_name: str, client_runs: Optional[ClientRuns] = None):
        self.handle = handle
        self.client_runs = client_runs
        self.local_inflight: set[str] = set()  # run ids the client itself is still running
        self.client = handle.client
        self.linux = backend_name == "linux"
        self.retries = handle.cfg.retries
        me = client_identity()
        self.expect = (me["version"], me["core"])
        self.sweep = uuid.uuid4().hex[:12]
        self.done_q: _queue.Queue = _queue.Queue()
        self.pending: dict[str, tuple[Any, Any, int]] = {}  # key → (future, runspec, attempt)
        self.lost: dict[str, list[str]] = {}  # run id → why each attempt was lost
        self.lost_hosts: set[str] = set()  # hosts where a worker died in a linux run
        # Tasks a worker started (run_task announces it): a worker holds the
        # next run while it runs one, and one that dies with it had not
        # started; it goes out again without counting as a try, a few times.
        self.started: set[str] = set()
        self.requeued: dict[str, int] = {}
        self._submitted = 0
        self.client.subscribe_topic(started_topic(self.sweep), lambda event: self.started.add(event[1]))
        self.committed: set[str] = set()
        self._status_at = 0.0
        self._threads = 1
        self._none_since: Optional[float] = None  # since when no worker has been connected (_no_workers)
        self._none_said = False

    # -- submitting

    def _window(self) -> int:
        return max(2, 2 * self._threads)

    def _submit(self, rs: Any, attempt: int, backend: Any) -> None:
        self._submitted += 1
        key = f"ccbench-{self.sweep}-{rs.run_id}-{self._submitted}"
        fut = self.client.submit(run_task, backend, rs, self.expect, self.sweep, self.linux, key=key,
                                 pure=False, retries=0,
                                 resources={LINUX_RESOURCE: 1} if self.linux else None)
        self.pending[key] = (fut, rs, attempt)
        fut.add_done_callback(self.done_q.put)

    def _status(self, committer: Any, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._status_at < 1.0:
            return
        self._status_at = now
        with contextlib.suppress(Exception):
            info = self.client.scheduler_info(n_workers=-1)
            workers = info.get("workers", {})
            self._threads = max(1, sum(w.get("nthreads", 1) for w in workers.values()))
            processing = self.client.processing()
            mine = len(self.local_inflight) + sum(1 for keys in processing.values() for k in keys
                                                  if isinstance(k, str) and k.startswith(f"ccbench-{self.sweep}-"))
            _tell(committer, "cluster_status", len(workers), mine)
            self._no_workers(committer, bool(workers), now)

    def _no_workers(self, committer: Any, any_up: bool, now: float) -> None:
        """Every worker gone mid-sweep (killed, pre-empted, jobs ended): the sweep
        waits for new ones, as an autoscaling cluster would bring; after
        NO_WORKER_NOTE_S it says so once, with what to do (a log shows it too)."""
        if any_up or self.local_inflight:
            self._none_since = None
            return
        if self._none_since is None:
            self._none_since, self._none_said = now, False
        if not self._none_said and now - self._none_since >= NO_WORKER_NOTE_S:
            self._none_said = True
            cfg = self.handle.cfg
            how = (f"start some: dask worker {cfg.address} --nthreads 1" if cfg.kind == "tcp" else
                   "its batch jobs ended or have not started: see the batch system's queue" if cfg.batch else
                   "its worker processes died")
            _tell(committer, "note", f"no worker connected for {NO_WORKER_NOTE_S:.0f} s: the sweep waits for one "
                                     f"({how}), or press Ctrl-C: what is committed stays and the same command "
                                     "resumes")

    # -- the loop

    def __call__(self, todo: Sequence[Any], backend: Any, committer: Any) -> None:
        mine = self.client_runs.claimed if self.client_runs is not None else {}
        queue = [rs for rs in reversed(todo) if rs.run_id not in mine]
        try:
            self._status(committer, force=True)
            # the workers first, then what the client ran while they started
            while queue and len(self.pending) < self._window():
                self._submit(queue.pop(), 0, backend)
            if self.client_runs is not None:
                wanted = {rs.run_id for rs in todo}
                self.local_inflight = set(mine) & wanted
                for done in self.client_runs.hand_over(self.done_q.put):
                    self._handle_own(done, committer)
            while queue or self.pending or self.local_inflight:
                while queue and len(self.pending) < self._window():
                    self._submit(queue.pop(), 0, backend)
                try:
                    fut = self.done_q.get(timeout=0.5)
                except _queue.Empty:
                    self._status(committer)
                    continue
                # what else came back meanwhile is committed in the same transaction
                with committer.together():
                    while fut is not None:
                        self._handle_item(fut, backend, committer)
                        try:
                            fut = self.done_q.get_nowait()
                        except _queue.Empty:
                            fut = None
                self._status(committer)
            if self.lost_hosts:
                self._clear_lost_hosts(committer)
        except KeyboardInterrupt:
            self._stop(committer)
            raise
        except _Stop as e:
            self._stop(committer)
            raise UsageError(str(e)) from None
        except BaseException:
            self._stop(None)
            raise

    def _handle_item(self, item: Any, backend: Any, committer: Any, stopping: bool = False) -> None:
        """What came back on ``done_q``: a worker's future, or (runspec, outcome) of a client run."""
        if isinstance(item, tuple):
            self._handle_own(item, committer)
        else:
            self._handle(item, backend, committer, stopping)

    def _handle_own(self, done: tuple, committer: Any) -> None:
        """A run the client ran itself (ClientRuns) has ended."""
        rs, outcome = done
        if rs.run_id in self.local_inflight:  # else not a run of this sweep's todo
            self.local_inflight.discard(rs.run_id)
            if rs.run_id not in self.committed:
                self.committed.add(rs.run_id)
                committer.commit(rs, outcome)

    def _handle(self, fut: Any, backend: Any, committer: Any, stopping: bool = False) -> None:
        entry = self.pending.pop(fut.key, None)
        if entry is None:
            return
        _, rs, attempt = entry
        if fut.status in ("pending", "lost"):
            # Done, then lost with its worker before we fetched it: the
            # scheduler computes it again; wait for that.
            self.pending[fut.key] = entry
            fut.add_done_callback(self.done_q.put)
            return
        if fut.status == "finished":
            try:
                kind, payload, notes = fut.result(timeout=RESULT_FETCH_S)
            except TimeoutError:
                # its worker died after it finished, before the result was fetched: the
                # fetch waits for the scheduler to compute it again, which needs a worker;
                # look again shortly (then "lost", it waits on its callback like the above)
                self.pending[fut.key] = entry
                threading.Timer(1.0, self.done_q.put, (fut,)).start()
                return
            fut.release()
            for line in notes:
                _tell(committer, "note", line)
            if kind == "done":
                if rs.run_id not in self.committed:
                    self.committed.add(rs.run_id)
                    committer.commit(rs, from_wire(payload))
            elif kind == "mismatch" and not stopping:
                me = client_identity()
                raise _Stop(
                    f"{self.handle.cfg.named}: a worker that joined during the sweep (host {payload['host']}, pid "
                    f"{payload['pid']}) runs ccbench {payload['version']} (core {payload['core']}) from "
                    f"{payload['package']}; this client runs ccbench {me['version']} (core {me['core']}) "
                    f"from {me['package']}: install the same ccbench on every worker; the runs finished "
                    "so far are saved")
            return
        if stopping:
            return
        if fut.status == "cancelled":
            why = "its task was cancelled by the scheduler (a worker or the scheduler restarted)"
        else:
            exc = fut.exception()
            name = type(exc).__name__
            if exc is not None and name != "KilledWorker":  # the run itself could not be sent or returned
                self.committed.add(rs.run_id)
                committer.commit(rs, Outcome(rs.run_id, "failed", None, error_text(exc), 0.0))
                return
            if exc is not None:  # KilledWorker; its own text is a paragraph of advice
                if self.linux:
                    self.lost_hosts.add(_address_host(exc.last_worker.address))
                if fut.key not in self.started and self.requeued.get(rs.run_id, 0) < MAX_REQUEUES:
                    self.requeued[rs.run_id] = self.requeued.get(rs.run_id, 0) + 1
                    _tell(committer, "run_retried", rs, f"the worker holding it died before it started "
                                                        f"({exc.last_worker.address}); not counted as a try")
                    self._submit(rs, attempt, backend)
                    return
                why = f"the worker running it died ({exc.last_worker.address}, KilledWorker)"
            else:
                why = f"the worker running it died ({fut.status})"
        self.lost.setdefault(rs.run_id, []).append(why)
        if attempt < self.retries:
            _tell(committer, "run_retried", rs, f"{why} (try {attempt + 2} of {self.retries + 1})")
            self._submit(rs, attempt + 1, backend)
            return
        n = attempt + 1
        text = (f"WorkerLost: lost {n} time{'s' if n > 1 else ''} (retries = {self.retries}): "
                + "; ".join(self.lost[rs.run_id]) + ". Running the study again retries it.")
        self.committed.add(rs.run_id)
        committer.commit(rs, Outcome(rs.run_id, "failed", None, text, 0.0))

    def _clear_lost_hosts(self, committer: Any) -> None:
        """A worker that died in a linux run left its namespaces (and, until
        they end, its processes) on its host. Each later linux run there
        clears them first (run_task); at the end every worker clears its
        host, and a host with no worker left is named."""
        answers: dict = {}

        def ask() -> None:
            answers.update(self.client.run(clear_dead_linux_runs, on_error="return"))

        t = threading.Thread(target=ask, daemon=True)
        t.start()
        t.join(CLEAR_TIMEOUT_S)
        reached = set()
        for address, lines in sorted(answers.items()):
            host = _address_host(address)
            if isinstance(lines, BaseException):
                continue
            if host not in reached:  # workers on one host clear the same things
                reached.add(host)
                for line in lines:
                    _tell(committer, "note", f"{host}: {line}")
        for host in sorted(self.lost_hosts - reached):
            _tell(committer, "note", f"{host}: no worker answered there after its worker died in a linux run; "
                                  "what that run left stays until `sudo ccbench doctor --cleanup` runs on it")

    def _stop(self, committer: Any) -> None:
        """Tell the workers to stop this sweep; keep what finishes within the grace period."""
        # In a thread: a worker that does not answer must not hold up the stop.
        t = threading.Thread(target=lambda: self.client.run(stop_sweep, self.sweep, on_error="return"),
                             daemon=True)
        t.start()
        with contextlib.suppress(KeyboardInterrupt):
            t.join(STOP_TIMEOUT_S)
        try:
            if committer is not None:
                # linux runs were interrupted and clean up (namespaces, processes): wait for that
                deadline = time.monotonic() + (LINUX_STOP_GRACE_S if self.linux else INTERRUPT_GRACE_S)
                while (self.pending or self.local_inflight) and time.monotonic() < deadline:
                    try:
                        fut = self.done_q.get(timeout=max(0.01, deadline - time.monotonic()))
                    except _queue.Empty:
                        break
                    self._handle_item(fut, None, committer, stopping=True)
        except KeyboardInterrupt:
            pass  # a second Ctrl-C: stop now
        finally:
            if self.client_runs is not None:
                self.client_runs.stop()  # its run still going, if any (it had the grace period)
            futs = [f for f, _, _ in self.pending.values()]
            self.pending.clear()
            with contextlib.suppress(BaseException):
                self.client.cancel(futs)


def _study_ccas(runs: Sequence[Any]) -> list[str]:
    seen: dict[str, None] = {}
    for r in runs:
        for f in (r.config or {}).get("flows", []):
            if f.get("cca"):
                seen[f["cca"]] = None
    return list(seen)


def execute_on_cluster(study: Any, runs: Sequence[Any], backend: Any, out_dir: Any, cfg: ClusterConfig,
                       progress: Any = None, status: Callable[[str], None] = lambda s: None,
                       new_version: bool = False) -> Any:
    """``execute`` on a Dask cluster: reach it, check every worker, then run.

    Nothing is written to ``out_dir`` unless the cluster is up and every
    worker passed its check.
    """
    from ccbench.executor.local import execute

    backend_name = getattr(backend, "name", type(backend).__name__)
    early = ClientRuns(backend, runs).start() if early_runs_fit(cfg, backend, runs, out_dir) else None
    try:
        handle = open_cluster(cfg, status)
        try:
            preflight(handle, backend_name, _study_ccas(runs) if backend_name == "linux" else ())
        except BaseException:
            handle.close()
            raise
    except BaseException:
        if early is not None:
            early.stop()  # on an error or Ctrl-C its results are dropped with it
        raise
    if early is not None:
        early.stop_taking()
    try:
        with handle:
            return execute(study, runs, backend, out_dir, progress=progress,
                           runner=ClusterRunner(handle, backend_name, early), new_version=new_version)
    finally:
        if early is not None:
            # wherever an interruption or error came (opening the store, before the runner's
            # own handling), its thread ends here: one left in the simulator aborts the process
            # at exit; after a finished sweep it has ended already
            early.stop()
