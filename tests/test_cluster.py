"""`ccbench run --cluster`: a study's runs on Dask (issue 14).

Real processes, no mocks: a `dask scheduler` and two `dask worker`
processes on localhost (started here, see dask_test_cluster.py), the CLI in
this process or in a child process (to Ctrl-C it). The scheduler is started
with allowed-failures = 0 so a lost worker is ccbench's to retry.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import duckdb
import pytest

import distributed  # noqa: F401  (`make test` installs .[cluster])

from ccbench import backends  # noqa: E402
from ccbench.cli import main  # noqa: E402
from ccbench.errors import UsageError  # noqa: E402
from ccbench.executor import execute  # noqa: E402
from ccbench.executor.cluster_config import resolve  # noqa: E402
from ccbench.spec import load_study  # noqa: E402
from ccbench.store import DB_FILENAME  # noqa: E402
from root_checks import need_linux_backend  # noqa: E402

from dask_test_cluster import PYTHONPATH, DaskProcs  # noqa: E402

# 12 runs: 3 losses x 2 CCAs x 2 repetitions, ~0.1-0.5 s each.
SWEEP = """\
[study]
name = "cluster-sweep"
duration = "3s"
repetitions = 2
seed = 7
sample_interval = "10ms"

[topology]
senders = 2

[topology.bottleneck]
rate = "50Mbit"
delay = "10ms"
buffer = "1bdp"

[[flows]]
cca = "cubic"

[[flows]]
cca = "bbr"
sender = 1

[sweep]
"topology.bottleneck.loss" = ["0%", "0.5%", "1%"]
"flows.0.cca" = ["cubic", "reno"]
"""

TABLES = ("runs", "flows", "samples", "queue", "rpcs")


@pytest.fixture(scope="module")
def study_file(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("study") / "sweep.toml"
    p.write_text(SWEEP)
    return p


@pytest.fixture(scope="module")
def serial(study_file, tmp_path_factory) -> Path:
    """The same study run serially in this process."""
    out = tmp_path_factory.mktemp("serial")
    s = load_study(study_file)
    execute(s, s.runs(), backends.get("sim"), out)
    return out


@pytest.fixture(scope="module")
def dask_procs(tmp_path_factory):
    procs = DaskProcs(tmp_path_factory.mktemp("dask"), allowed_failures=0)
    try:
        procs.start(2)
        yield procs
    finally:
        procs.close()


def query(out: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(out / DB_FILENAME), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def dump(out: Path) -> dict[str, list]:
    """Every table, ordered, without what differs between any two executions."""
    got = {}
    for t in TABLES:
        cols = [r[0] for r in query(out, f"DESCRIBE {t}")]
        keep = [c for c in cols if c not in ("wall_time_s", "finished_at", "run_index")]
        rows = query(out, f"SELECT {', '.join(keep)} FROM {t} ORDER BY ALL")
        got[t] = [tuple(repr(v) for v in r) for r in rows]  # repr: NaN == NaN, floats to the bit
    return got


def run_counts(out: Path) -> dict[str, int]:
    return dict(query(out, "SELECT status, count(*) FROM runs GROUP BY status"))


def assert_tables_equal(out: Path, serial: Path) -> None:
    a, b = dump(out), dump(serial)
    assert b["runs"] and len(b["samples"]) > 1000
    for t in TABLES:
        assert a[t] == b[t], f"table {t} differs from the serial run"


def assert_same_as_serial(out: Path, serial: Path) -> None:
    assert run_counts(serial) == {"ok": 12}
    assert_tables_equal(out, serial)


def ccbench_proc(*args: str, env: dict | None = None, cwd=None) -> subprocess.Popen:
    """`ccbench run ARGS` (in ``env``, default this process's) with its output piped."""
    return subprocess.Popen([sys.executable, "-m", "ccbench", "run", *args],
                            env={**(os.environ if env is None else env), "PYTHONPATH": PYTHONPATH},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)


def read_until(proc: subprocess.Popen, pattern: str, timeout: float = 120) -> list[str]:
    """Lines of the child's stdout until one matches ``pattern``."""
    lines = []
    t0 = time.monotonic()
    for line in proc.stdout:
        lines.append(line)
        if re.search(pattern, line):
            return lines
        assert time.monotonic() - t0 < timeout, f"no {pattern!r} within {timeout} s: {lines}"
    raise AssertionError(f"the sweep ended before {pattern!r}: {lines} {proc.stderr.read()}")


# ----------------------------------------------------------------- configuration


def test_bad_cluster_input_is_one_error_before_anything_is_written(study_file, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CCBENCH_CLUSTER_CONFIG", str(tmp_path / "none.toml"))
    out = tmp_path / "out"
    cases = [
        (["--cluster", "kubernetes"], "unknown cluster kind (got 'kubernetes'; allowed: local, local:N, tcp://"),
        (["--cluster", "local:zero"], "local:N needs a number of workers"),
        (["--cluster", "tcp://127.0.0.1:9"], "cannot reach the Dask scheduler at tcp://127.0.0.1:9 ("),
        (["--cluster", "tls://127.0.0.1:9"], "tls:// schedulers are not supported (got 'tls://127.0.0.1:9'"),
        (["--cluster", "slurm", "--cores", "many"], "--cores: got 'many'; expected a number of cores"),
        (["--cluster", "local:2", "--queue", "q"], "--queue: only for batch clusters"),
        (["--cluster", "local:2", "--cores", "4"], "--cores: only for batch clusters (slurm, pbs, sge), not "
                                                   "--cluster local:2"),
        (["--queue", "q"], "--queue needs --cluster"),
    ]
    for extra, message in cases:
        assert main(["run", str(study_file), "--out", str(out), *extra]) == 2, extra
        err = capsys.readouterr().err
        assert message in err, (extra, err)
        assert err.count("\n") == 1 and "Traceback" not in err
        assert not out.exists()
    # a malformed [cluster] table in the study
    bad = tmp_path / "bad.toml"
    bad.write_text(SWEEP + '\n[cluster]\nkind = "slurm"\nwalltime = "forever"\n')
    assert main(["run", str(bad), "--out", str(out), "--cluster"]) == 2
    err = capsys.readouterr().err
    assert "bad.toml [cluster]: walltime: got 'forever'; expected a wall time such as '01:00:00'" in err
    bad.write_text(SWEEP + '\n[cluster]\nnodes = 3\n')
    assert main(["run", str(bad), "--out", str(out), "--cluster", "local:1"]) == 2
    assert "[cluster]: nodes: unknown cluster setting (allowed: kind, address" in capsys.readouterr().err
    # ... also when the run does not use the cluster: the typo is found now, not on the day it is
    assert main(["run", str(bad), "--out", str(out)]) == 2
    assert "[cluster]: nodes: unknown cluster setting" in capsys.readouterr().err
    bad.write_text(SWEEP + '\n[cluster]\nkind = "local:2"\ncores = 2\n')  # so is a setting its kind ignores
    assert main(["run", str(bad), "--out", str(out)]) == 2
    assert "bad.toml [cluster]: cores: only for batch clusters (slurm, pbs, sge), not kind = 'local'" in \
        capsys.readouterr().err
    assert not out.exists()


def test_a_silent_listener_at_the_scheduler_address_is_one_error_in_bounded_time(study_file, tmp_path, capsys,
                                                                                  monkeypatch):
    """Dask's connect timeout does not bound its handshake: against a web
    server, which waits for a request as Dask waits for an answer, it waited
    for good (a tester left it 10 minutes). ccbench gives up after
    HANDSHAKE_TIMEOUT_S (here shortened) with one line. The listener here
    accepts and says nothing, as that web server did."""
    import socket
    import threading

    from ccbench.executor import cluster

    monkeypatch.setenv("CCBENCH_CLUSTER_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setattr(cluster, "HANDSHAKE_TIMEOUT_S", 3.0)
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        try:
            while True:
                held.append(listener.accept()[0])
        except OSError:  # closed
            pass

    threading.Thread(target=accept, daemon=True).start()
    address = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    try:
        t0 = time.monotonic()
        assert main(["run", str(study_file), "--out", str(tmp_path / "out"), "--cluster", address]) == 2
        took = time.monotonic() - t0
    finally:
        listener.close()
        for c in held:
            c.close()
    err = capsys.readouterr().err
    assert f"{address} did not answer as a Dask scheduler" in err and err.count("\n") == 1, err
    assert held and took < 10 and not (tmp_path / "out").exists()


def test_a_server_that_greets_in_another_protocol_is_named_in_one_line(study_file, tmp_path, capsys, monkeypatch):
    """An SSH port given as the scheduler's (any server that talks first):
    Dask's client read the banner as a frame length, and the error said
    'MemoryError', then a half-made client printed a traceback 10 s later.
    Now what the server sent is shown, at once, and no client is made."""
    import socket
    import threading

    monkeypatch.setenv("CCBENCH_CLUSTER_CONFIG", str(tmp_path / "none.toml"))
    listener = socket.create_server(("127.0.0.1", 0))

    def greet() -> None:
        try:
            while True:
                c = listener.accept()[0]
                c.sendall(b"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n")
                c.close()
        except OSError:  # closed
            pass

    threading.Thread(target=greet, daemon=True).start()
    address = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    try:
        t0 = time.monotonic()
        assert main(["run", str(study_file), "--out", str(tmp_path / "out"), "--cluster", address]) == 2
        took = time.monotonic() - t0
    finally:
        listener.close()
    err = capsys.readouterr().err
    assert (f"{address} did not answer as a Dask scheduler (it sent 'SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3', "
            "not Dask's handshake;") in err and err.count("\n") == 1, err
    assert took < 5 and not (tmp_path / "out").exists()


def test_settings_come_from_cli_then_study_then_user_file(tmp_path, monkeypatch):
    user = tmp_path / "cluster.toml"
    user.write_text('[cluster]\nkind = "slurm"\nqueue = "long"\ncores = 4\nmemory = "8GB"\njobs = 3\n')
    monkeypatch.setenv("CCBENCH_CLUSTER_CONFIG", str(user))
    cfg = resolve("", {"queue": "short", "walltime": "00:30:00"}, "s.toml", {"cores": "2"})
    assert (cfg.kind, cfg.queue, cfg.cores, cfg.memory, cfg.walltime, cfg.jobs) == \
        ("slurm", "short", 2, "8GB", "00:30:00", 3)
    assert cfg.sources["queue"] == "s.toml [cluster]" and cfg.sources["memory"] == f"{user} [cluster]"
    cfg = resolve("local:3", None)
    assert (cfg.kind, cfg.workers, cfg.retries) == ("local", 3, 2)


def test_a_table_names_a_scheduler_by_address_and_refuses_what_its_kind_ignores(tmp_path, monkeypatch):
    monkeypatch.setenv("CCBENCH_CLUSTER_CONFIG", str(tmp_path / "none.toml"))
    for table in ({"address": "tcp://head:8786"}, {"kind": "tcp", "address": "tcp://head:8786"},
                  {"kind": "tcp://head:8786"}):
        cfg = resolve("", table, "s.toml")
        assert (cfg.kind, cfg.address, cfg.named) == ("tcp", "tcp://head:8786", "s.toml [cluster] (tcp://head:8786)")
    assert resolve("slurm", {"kind": "tcp", "address": "tcp://head:8786"}, "s.toml").named == "--cluster slurm"
    refused = [
        ({"kind": "tcp"}, "s.toml [cluster]: kind = 'tcp' needs the scheduler's address = 'tcp://HOST:PORT'"),
        ({"kind": "slurm", "address": "tcp://head:8786"}, "s.toml [cluster]: address is for a running scheduler "
                                                         "(kind = 'tcp' or no kind), not kind = 'slurm'"),
        ({"address": "head:8786"}, "s.toml [cluster]: address: got 'head:8786'; expected a scheduler address"),
        ({"kind": "local:2", "memory": "4GB"}, "s.toml [cluster]: memory: only for batch clusters (slurm, pbs, "
                                               "sge), not kind = 'local'"),
        ({"address": "tcp://head:8786", "queue": "q"}, "s.toml [cluster]: queue: only for batch clusters"),
        # workers, like local:N's number, counts only beside kind = 'local' (it was ignored, or the later key won)
        ({"kind": "slurm", "workers": 3}, "s.toml [cluster]: workers: only beside kind = 'local' in the same table "
                                          "(got workers = 3 with kind = 'slurm')"),
        ({"address": "tcp://head:8786", "workers": 3}, "with kind = 'tcp://head:8786'"),
        ({"workers": 3}, "with no kind"),
        ({"kind": "local:2", "workers": 3}, "s.toml [cluster]: workers: 3 and kind = 'local:2' disagree"),
        ({"workers": 3, "kind": "local:2"}, "s.toml [cluster]: workers: 3 and kind = 'local:2' disagree"),
    ]
    assert resolve("", {"kind": "local", "workers": 3}, "s.toml").workers == 3
    assert resolve("", {"workers": 2, "kind": "local:2"}, "s.toml").workers == 2
    for table, message in refused:
        with pytest.raises(UsageError) as e:
            resolve("", table, "s.toml")
        assert message in str(e.value), (table, str(e.value))
    # a default elsewhere (the user's file) is only unused by a local cluster
    user = tmp_path / "cluster.toml"
    user.write_text('[cluster]\nqueue = "long"\n')
    monkeypatch.setenv("CCBENCH_CLUSTER_CONFIG", str(user))
    assert resolve("local:2", None).kind == "local"
    # ... and the scheduler's address comes only with its kind, from the same place
    user.write_text('[cluster]\naddress = "tcp://elsewhere:1"\n')
    with pytest.raises(UsageError, match="s.toml \\[cluster\\]: kind = 'tcp' needs the scheduler's address"):
        resolve("", {"kind": "tcp"}, "s.toml")


def test_study_with_a_cluster_table_keeps_its_run_ids(study_file, tmp_path):
    p = tmp_path / "with.toml"
    p.write_text(SWEEP + '\n[cluster]\nkind = "local:2"\n')
    assert [r.run_id for r in load_study(p).runs()] == [r.run_id for r in load_study(study_file).runs()]


# ----------------------------------------------------------------- a scheduler and two workers


def test_sweep_through_scheduler_is_bit_identical_to_serial(dask_procs, study_file, serial, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(study_file), "--out", str(out), "--cluster", dask_procs.address]) == 0
    captured = capsys.readouterr()
    assert "cluster: 2 workers up" in captured.out
    assert_same_as_serial(out, serial)
    assert dask_procs.scheduler_tasks() == 0


def test_version_mismatch_is_refused_before_any_run(dask_procs, study_file, tmp_path, capsys):
    """A third worker runs another copy of ccbench (its own PYTHONPATH, another version)."""
    alt = tmp_path / "alt"
    shutil.copytree(Path(PYTHONPATH) / "ccbench", alt / "ccbench", ignore=shutil.ignore_patterns("__pycache__"))
    init = alt / "ccbench" / "__init__.py"
    init.write_text(re.sub(r'__version__ = "[^"]*"', '__version__ = "0.0.9-other"', init.read_text()))
    dask_procs.start_worker("old", pythonpath=str(alt))
    try:
        dask_procs.wait_workers(3)
        out = tmp_path / "out"
        assert main(["run", str(study_file), "--out", str(out), "--cluster", dask_procs.address]) == 2
        err = capsys.readouterr().err
        import ccbench

        assert re.search(r"worker tcp://127\.0\.0\.1:\d+ \(host [^,]+, pid \d+\) runs ccbench 0\.0\.9-other "
                         rf"\(core [0-9a-f]{{16}}\) from {re.escape(str(alt / 'ccbench'))}; this client runs "
                         rf"ccbench {re.escape(ccbench.__version__)} \(core [0-9a-f]{{16}}\)", err), err
        assert not out.exists()
        assert dask_procs.scheduler_tasks() == 0
    finally:
        dask_procs.kill("old", signal.SIGTERM)
        dask_procs.wait_workers(2)


def ctrl_c_then_resume(study_file: Path, serial: Path, out: Path, cluster: str, meanwhile=lambda: None) -> None:
    """Ctrl-C a --cluster sweep after its third run: exit 130, the finished
    runs stay; ``meanwhile()``; the rerun resumes and ends as the serial run."""
    proc = ccbench_proc(str(study_file), "--out", str(out), "--cluster", cluster, "--retries", "1")
    try:
        read_until(proc, r"^\[3/12\]")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    # the resume line repeats what shaped the sweep (it left out --retries and the batch settings)
    assert "interrupted:" in err and f"--cluster {cluster} --retries 1" in err, err
    done = run_counts(out).get("ok", 0)
    assert 3 <= done < 12
    meanwhile()
    proc = ccbench_proc(str(study_file), "--out", str(out), "--cluster", cluster)
    stdout, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    assert f"{done} of 12 runs already finished; running {12 - done}" in stdout
    assert_same_as_serial(out, serial)


def test_ctrl_c_keeps_finished_runs_and_the_rerun_resumes(dask_procs, study_file, serial, tmp_path):
    def idle() -> None:  # the workers are left idle: nothing of the sweep queued or running
        t0 = time.monotonic()
        while dask_procs.scheduler_tasks() and time.monotonic() - t0 < 10:
            time.sleep(0.2)
        assert dask_procs.scheduler_tasks() == 0

    ctrl_c_then_resume(study_file, serial, tmp_path / "out", dask_procs.address, idle)


def test_a_worker_killed_mid_sweep_costs_nothing(dask_procs, study_file, serial, tmp_path):
    """SIGKILL to the worker running a run: the run is retried on the other
    worker; the sweep finishes with every run exactly once."""
    out = tmp_path / "out"
    proc = ccbench_proc(str(study_file), "--out", str(out), "--cluster", dask_procs.address)
    try:
        read_until(proc, r"^\[2/12\]")
        busy = None
        t0 = time.monotonic()
        while busy is None and time.monotonic() - t0 < 30:
            names = dask_procs.worker_names()
            for addr, keys in dask_procs.client().processing().items():
                if any(str(k).startswith("ccbench-") for k in keys):
                    busy = names.get(addr)
                    break
        assert busy, "no worker was running a run"
        dask_procs.kill(busy)
        stdout, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err + stdout
    # the run it was running, or (its runs take milliseconds) one it held and had not started
    assert re.search(r"^retrying \w+ .*: the worker (running it died \(tcp://[\d.]+:\d+, KilledWorker\) \(try 2 "
                     r"of 3\)|holding it died before it started \(tcp://[\d.]+:\d+\); not counted as a try)$",
                     stdout, re.M), stdout
    assert run_counts(out) == {"ok": 12}
    assert_same_as_serial(out, serial)  # runs, flows, samples...: each exactly once
    dask_procs.start_worker(busy)
    dask_procs.wait_workers(2)


# ----------------------------------------------------------------- local cluster, linux backend

LINUX = """\
[study]
name = "cluster-linux"
duration = "2s"
sample_interval = "100ms"

[topology.bottleneck]
rate = "20Mbit"
delay = "5ms"
buffer = "1bdp"

[[flows]]
cca = "cubic"

[sweep]
"topology.bottleneck.loss" = ["0%", "0.5%"]
"""


def ancestors(pid: int) -> list[int]:
    """The parent, grandparent, ... of a live process ([] once it is gone)."""
    out = []
    while pid > 1:
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        out.append(pid)
    return out


def need_linux() -> None:
    need_linux_backend("the linux-backend cluster test needs root and the linux backend")


def test_linux_sweep_on_a_local_cluster_leaves_nothing(tmp_path, capsys):
    from ccbench.backends.linux import cleanup

    need_linux()
    before = {r.token for r in cleanup.find(include_live=True)}
    p = tmp_path / "linux.toml"
    p.write_text(LINUX)
    out = tmp_path / "out"
    code = main(["run", str(p), "--backend", "linux", "--out", str(out), "--cluster", "local:2"])
    captured = capsys.readouterr()
    assert code in (0,), captured.err
    counts = run_counts(out)
    assert sum(counts.values()) == 2 and not counts.get("failed"), counts
    # one at a time (the machine-wide lock): the second run's traffic started after the first's 2 s
    (a,), (b,) = query(out, "SELECT CAST(stats->>'t0_monotonic_ns' AS BIGINT) FROM runs ORDER BY 1")
    assert (b - a) / 1e9 >= 2.0, (a, b)
    left = [r for r in cleanup.find(include_live=True) if r.token not in before and not r.empty()
            and (r.owner is None or not Path(f"/proc/{r.owner}").exists())]
    assert not left, [r.describe() for r in left]
    # (other programs on this machine may be running linux runs: only this process's workers count)
    assert not [r for r in cleanup.find(include_live=True) if r.token not in before and r.owner
                and os.getpid() in ancestors(r.owner)], "a run still in progress after the sweep"


def test_local_cluster_matches_serial(study_file, serial, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(study_file), "--out", str(out), "--cluster", "local:2"]) == 0
    assert_same_as_serial(out, serial)


class LoggedSim(backends.get("sim").__class__):
    """The simulator, writing "pid run_id" to a log file for every run it starts
    (the forked LocalCluster workers have this module: pickled by reference);
    slow in the client, so that the workers get runs too."""

    name = "sim"
    log = ""
    client_pid = 0

    def run(self, runspec, stop_flag=None):
        with open(self.log, "a") as f:
            f.write(f"{os.getpid()} {runspec.run_id}\n")
        if os.getpid() == self.client_pid:
            time.sleep(0.5)
        return super().run(runspec, stop_flag)


class CountingProgress:
    def __init__(self):
        self.committed: list[str] = []

    def start(self, total, done, todo): ...

    def run_finished(self, runspec, outcome):
        self.committed.append(runspec.run_id)

    def interrupted(self): ...

    def finish(self): ...


class KillAllAfterFirst(CountingProgress):
    """Kills every worker when the first run is committed; starts them again
    once the sweep has said it is waiting for workers."""

    def __init__(self, procs):
        super().__init__()
        self.procs, self.notes, self.statuses = procs, [], []

    def run_finished(self, runspec, outcome):
        super().run_finished(runspec, outcome)
        if len(self.committed) == 1:
            for name in list(self.procs.workers):
                self.procs.kill(name)
            # without the note, the sweep would wait for good: new workers after a minute anyway
            self.fallback = threading.Timer(60, self.restart)
            self.fallback.start()

    def restart(self):
        for name in ("w0", "w1"):
            if name not in self.procs.workers:
                self.procs.start_worker(name)

    def run_retried(self, runspec, why): ...

    def cluster_status(self, workers, inflight):
        self.statuses.append(workers)

    def note(self, text):
        self.notes.append(text)
        if text.startswith("no worker connected"):
            self.fallback.cancel()
            self.restart()


def test_a_sweep_whose_workers_all_died_says_it_waits_and_goes_on_with_new_ones(dask_procs, study_file, serial,
                                                                                tmp_path, monkeypatch):
    """Every worker of a running scheduler killed mid-sweep: the sweep said
    nothing and waited for good. Now, after NO_WORKER_NOTE_S (here 2 s), it
    says it waits and how to add workers; new ones finish the sweep."""
    from ccbench.executor import cluster

    monkeypatch.setattr(cluster, "NO_WORKER_NOTE_S", 2.0)
    study = load_study(study_file)
    progress = KillAllAfterFirst(dask_procs)
    try:
        summary = cluster.execute_on_cluster(study, study.runs(), backends.get("sim"), tmp_path / "out",
                                             resolve(dask_procs.address), progress=progress)
    finally:
        progress.restart()
        dask_procs.wait_workers(2)
    waiting = [n for n in progress.notes if n.startswith("no worker connected")]
    assert waiting == [f"no worker connected for 2 s: the sweep waits for one (start some: dask worker "
                       f"{dask_procs.address} --nthreads 1), or press Ctrl-C: what is committed stays and the "
                       "same command resumes"], (progress.notes, progress.statuses)
    assert 0 in progress.statuses and (summary.ok, summary.failed) == (12, 0), (progress.statuses, summary)
    assert_same_as_serial(tmp_path / "out", serial)


def test_local_cluster_client_runs_runs_while_the_cluster_starts(study_file, serial, tmp_path):
    """The client runs runs itself while its LocalCluster starts: each run is
    started exactly once (in the client or on a worker, never both), committed
    exactly once, and the store is the serial run's."""
    from ccbench.executor.cluster import execute_on_cluster

    backend = LoggedSim()
    backend.log, backend.client_pid = str(tmp_path / "started.log"), os.getpid()
    study = load_study(study_file)
    progress = CountingProgress()
    out = tmp_path / "out"
    summary = execute_on_cluster(study, study.runs(), backend, out, resolve("local:2"), progress=progress)
    assert (summary.ok, summary.failed, summary.interrupted) == (12, 0, False)
    started = [line.split() for line in Path(backend.log).read_text().splitlines()]
    ids = [r.run_id for r in study.runs()]
    assert sorted(rid for _, rid in started) == sorted(ids)  # none twice, none missing
    assert sorted(progress.committed) == sorted(ids)
    by_client = [rid for pid, rid in started if int(pid) == os.getpid()]
    assert by_client and by_client == ids[:len(by_client)]  # the first runs, in study order
    assert len(by_client) < 12
    assert_same_as_serial(out, serial)


class CtrlCAtStart(CountingProgress):
    """Ctrl-C the moment the sweep prints "running N runs": after the cluster
    is up, before the runner's own handling of an interruption."""

    def start(self, total, done, todo):
        raise KeyboardInterrupt


def test_ctrl_c_as_a_local_cluster_sweep_starts_leaves_no_thread_in_the_simulator(tmp_path):
    """A Ctrl-C there left the client's own run going in its thread; when
    Python then shut down, the thread returning from the simulator aborted the
    process (SIGABRT, core dump) in about half the tries, instead of exit 130.
    The run is long (minutes of simulated time), so the thread is inside it."""
    import threading

    from ccbench.executor.cluster import execute_on_cluster

    p = tmp_path / "long.toml"
    p.write_text(SWEEP.replace('duration = "3s"', 'duration = "600s"').replace('"50Mbit"', '"200Mbit"'))
    study = load_study(p)
    summary = execute_on_cluster(study, study.runs(), backends.get("sim"), tmp_path / "out", resolve("local:2"),
                                 progress=CtrlCAtStart())
    assert summary.interrupted and summary.ok == 0, summary
    left = [t.name for t in threading.enumerate() if t.name == "ccbench-client-runs" and t.is_alive()]
    assert not left, left


def test_ctrl_c_on_a_local_cluster_keeps_finished_runs_and_the_rerun_resumes(study_file, serial, tmp_path):
    """Here the client runs the first runs itself while the cluster starts (ClientRuns)."""
    ctrl_c_then_resume(study_file, serial, tmp_path / "out", "local:2")


def _worker_settings(keys: list) -> dict:
    import dask

    return {k: dask.config.get(k) for k in keys}


def test_local_cluster_workers_are_forked_with_ccbench_settings():
    """local:N workers are forked from the client (Linux) and run with OWN_CONFIG
    (Dask's instruments turned down)."""
    import dask

    from ccbench.executor.cluster import OWN_CONFIG, open_cluster

    with open_cluster(resolve("local:2")) as handle:
        got = handle.client.run(_worker_settings, list(OWN_CONFIG))
        assert len(got) == 2
        for settings in got.values():
            assert settings == OWN_CONFIG
        parents = handle.client.run(os.getppid)
        assert set(parents.values()) == {os.getpid()}
        cmd = handle.client.run(lambda: Path("/proc/self/cmdline").read_bytes())
        assert set(cmd.values()) == {Path("/proc/self/cmdline").read_bytes()}  # forked: our argv, not a spawn's
    # the settings were only for that cluster
    assert dask.config.get("distributed.admin.tick.interval") != OWN_CONFIG["distributed.admin.tick.interval"]


def test_local_cluster_killed_client_leaves_no_process_and_the_rerun_resumes(study_file, serial, tmp_path):
    """SIGKILL to `ccbench run --cluster local:2` mid-sweep (no handler runs):
    its workers (forked from it) and everything else it started exit on their
    own; the rerun resumes and the store ends up as the serial run's."""
    import psutil

    out = tmp_path / "out"
    proc = ccbench_proc(str(study_file), "--out", str(out), "--cluster", "local:2")
    try:
        read_until(proc, r"^\[2/12\]")
        children = psutil.Process(proc.pid).children(recursive=True)
        assert len(children) >= 2, children  # the two workers at least
        proc.kill()
        proc.communicate(timeout=30)
        _, alive = psutil.wait_procs(children, timeout=20)
        assert not alive, [(p.pid, p.cmdline()) for p in alive]
    finally:
        if proc.poll() is None:
            proc.kill()
    done = run_counts(out).get("ok", 0)
    assert 2 <= done < 12
    proc = ccbench_proc(str(study_file), "--out", str(out), "--cluster", "local:2")
    stdout, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    assert f"{done} of 12 runs already finished; running {12 - done}" in stdout
    assert_same_as_serial(out, serial)


def test_a_local_worker_killed_mid_sweep_costs_nothing(study_file, serial, tmp_path):
    """SIGKILL to a LocalCluster worker (forked from the client) in a run: the
    run is retried, its nanny starts a new worker, every run is stored once."""
    import psutil

    out = tmp_path / "out"
    proc = ccbench_proc(str(study_file), "--out", str(out), "--cluster", "local:2")
    try:
        read_until(proc, r"^\[2/12\]")
        workers = [p for p in psutil.Process(proc.pid).children() if "multiprocessing" not in " ".join(p.cmdline())]
        assert len(workers) == 2, [(p.pid, p.cmdline()) for p in workers]
        workers[0].kill()
        stdout, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err + stdout
    assert run_counts(out) == {"ok": 12}
    assert_same_as_serial(out, serial)


def test_a_run_waiting_on_a_killed_worker_costs_no_try(tmp_path):
    """A worker holds its next run while it runs one. SIGKILLed, it loses
    both; only the one it was running counts as a try. With retries = 0
    that one is recorded as failed and the waiting one still runs."""
    import psutil

    p = tmp_path / "long.toml"
    # 6 runs of about 3 s each (200 simulated seconds at 500 Mbit/s)
    p.write_text('[study]\nname = "long"\nduration = "200s"\nrepetitions = 6\n[topology.bottleneck]\n'
                 'rate = "500Mbit"\ndelay = "10ms"\n[[flows]]\ncca = "cubic"\n')
    out = tmp_path / "out"
    proc = ccbench_proc(str(p), "--out", str(out), "--cluster", "local:2", "--retries", "0")
    try:
        read_until(proc, r"^\[1/6\]")
        workers = [w for w in psutil.Process(proc.pid).children() if "multiprocessing" not in " ".join(w.cmdline())]
        workers[0].kill()
        stdout, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err + stdout  # the run it was running failed
    assert run_counts(out) == {"ok": 5, "failed": 1}, stdout
    assert "the worker holding it died before it started" in stdout, stdout  # it held one: the test's point


def test_ctrl_c_stops_linux_runs_on_a_local_cluster_and_leaves_nothing(tmp_path):
    """Ctrl-C (SIGINT to the terminal's process group) while a 30 s linux run
    is in a LocalCluster worker: the client tells the workers to stop, the
    run is interrupted and cleans up, exit 130 within seconds."""
    from ccbench.backends.linux import cleanup

    need_linux()
    p = tmp_path / "linux.toml"
    p.write_text(LINUX.replace('duration = "2s"', 'duration = "30s"'))
    proc = subprocess.Popen([sys.executable, "-m", "ccbench", "run", str(p), "--backend", "linux", "--out",
                             str(tmp_path / "out"), "--cluster", "local:2"],
                            env={**os.environ, "PYTHONPATH": PYTHONPATH}, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def ours():
        found = []
        for r in cleanup.find(include_live=True):
            try:
                stat = Path(f"/proc/{r.owner}/stat").read_text()
            except (OSError, TypeError):
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == proc.pid:  # owned by one of its workers
                found.append(r)
        return found

    try:
        t0 = time.monotonic()
        while not any(r.dir and (r.dir / "emu.stats.jsonl").exists() for r in ours()):
            assert proc.poll() is None and time.monotonic() - t0 < 150, "no linux run started"
            time.sleep(0.3)
        tokens = {r.token for r in ours()}
        os.killpg(proc.pid, signal.SIGINT)
        t1 = time.monotonic()
        _, err = proc.communicate(timeout=60)
        stopped = time.monotonic() - t1
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    assert "interrupted: 0 of 2 runs are finished" in err, err
    assert stopped < 25, f"took {stopped:.0f} s to stop (a 30 s run was not interrupted)"
    left = [r for r in cleanup.find(include_live=True) if r.token in tokens and not r.empty()]
    assert not left, [r.describe() for r in left]


def test_a_worker_killed_in_a_linux_run_leaves_nothing(tmp_path):
    """SIGKILL to the LocalCluster worker in a linux run: its emulator and
    load processes keep going and its namespaces stay, until the next linux
    run on the host clears them before it starts (and says so); the lost
    run is retried and every run is stored once."""
    from ccbench.backends.linux import cleanup

    need_linux()
    p = tmp_path / "linux.toml"
    p.write_text(LINUX.replace('duration = "2s"', 'duration = "8s"'))
    out = tmp_path / "out"
    proc = ccbench_proc(str(p), "--backend", "linux", "--out", str(out), "--cluster", "local:2")
    try:
        t0 = time.monotonic()
        while True:
            runs = [r for r in cleanup.find(include_live=True)
                    if r.owner and proc.pid in ancestors(r.owner) and r.dir and (r.dir / "emu.stats.jsonl").exists()]
            if runs:
                break
            assert proc.poll() is None and time.monotonic() - t0 < 150, "no linux run started"
            time.sleep(0.2)
        (dead,) = runs
        os.kill(dead.owner, signal.SIGKILL)
        stdout, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err + stdout
    assert run_counts(out) == {"ok": 2}
    assert re.search(r"^retrying \w+ .*: the worker running it died", stdout, re.M), stdout
    assert re.search(rf"^\S+: removed run ccb{dead.token}: .*namespace", stdout, re.M), stdout
    left = [r for r in cleanup.find(include_live=True) if r.token == dead.token and not r.empty()]
    assert not left, [r.describe() for r in left]
