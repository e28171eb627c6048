#!/usr/bin/env python3
"""Sweep throughput: one 48-run sim sweep (runs of about 0.3 s) four ways.

    python bench/sweep_scale.py [--only serial,jobs2,local2,sched2] [--rounds N]
    python bench/sweep_scale.py --idle-cost   # CPU an idle local:2 cluster takes

1. serial (``ccbench run``), 2. ``--jobs 2`` (process pool), 3. ``--cluster
local:2`` (an embedded LocalCluster), 4. a ``dask scheduler`` and two ``dask
worker`` processes started here (``--cluster tcp://...``), with the Dask
settings the README ("Running on a cluster") gives for workers
(``ccbench.executor.cluster.OWN_CONFIG`` as environment variables).

For each: wall time of the sweep, the start-up of the cluster (start or
reach it, wait for both workers, check them) apart, runs per second, the
speed-up over serial counting the start-up (what a user waits for) and
without it, and the per-run overhead: on each worker process, the gap
between the end of one run and the start of its next (median and p90 over
all gaps; this includes committing, moving the result and scheduling, i.e.
whatever keeps a worker from running runs). "CPU ms/run": the CPU time
of every process of the sweep (client, pool or scheduler and workers) per
run, start-up left out except for local:2, whose client runs runs while
its cluster starts (there "start-up" is the time until the workers were
up, runs already going): unlike wall times it depends little on what else
loads the machine, and on an idle 2-core machine the sweep cannot take
less than half of it. "of it sim": the part inside the simulator's run
call (thread CPU time), the rest is the executor's and the store's.
"Dask over pool" = median gap of a Dask path minus the process pool's.

Targets (issue 14): >= 1.8x serial with 2 workers on a 2-core machine,
start-up included ("x serial"; "w/o start" leaves it out);
Dask's per-run overhead over the pool <= 30 ms (median). The figures mean
little on a machine other work is loading: the bench prints the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import ccbench  # noqa: E402
from ccbench.executor import execute  # noqa: E402
from ccbench.spec import parse_study  # noqa: E402

from _timed_backend import TimedSim  # noqa: E402

STUDY = """
[study]
name = "sweep-scale"
duration = "30s"  # a run of about 0.3 s of wall time, the issue's figure (12 s was, before the simulator got faster)
repetitions = 4
seed = 3
sample_interval = "10ms"
[topology]
senders = 2
bottleneck = { rate = "300Mbit", delay = "10ms", buffer = "1bdp" }
[[flows]]
cca = "cubic"
[[flows]]
sender = 1
cca = "bbr"
[sweep]
"topology.bottleneck.loss" = ["0%", "0.1%", "0.5%", "1%"]
"flows.0.cca" = ["cubic", "reno", "bbr"]
"""


def gaps(out: Path) -> tuple[list[float], list[float], float]:
    """(gaps between consecutive runs on the same worker process, run wall times,
    CPU time of the simulations themselves), seconds."""
    # not at the top: --jobs 2's workers import this module (spawn), as they
    # import ccbench's command in real use, which has no store either
    from ccbench.store import Store

    with Store.open_existing(out) as s:
        stats = [r.stats for r in s.runs() if r.stats]
    by_pid: dict[int, list[tuple[float, float]]] = {}
    for st in stats:
        by_pid.setdefault(st["bench_pid"], []).append((st["bench_start"], st["bench_end"]))
    g = []
    for spans in by_pid.values():
        spans.sort()
        g += [b[0] - a[1] for a, b in zip(spans, spans[1:])]
    return g, [st["bench_end"] - st["bench_start"] for st in stats], sum(st["bench_cpu"] for st in stats)


def start_scheduler_and_workers(tmp: Path, n: int) -> tuple[str, list[subprocess.Popen]]:
    from ccbench.executor.cluster import OWN_CONFIG, env_of

    env = {**os.environ, **env_of(OWN_CONFIG)}
    tmp.mkdir(parents=True, exist_ok=True)
    sched_file = tmp / "scheduler.json"
    procs = [subprocess.Popen([sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--no-dashboard", "--scheduler-file", str(sched_file)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    while not (sched_file.exists() and sched_file.stat().st_size):
        time.sleep(0.1)
    address = json.loads(sched_file.read_text())["address"]
    for i in range(n):
        procs.append(subprocess.Popen([sys.executable, "-m", "dask", "worker", address, "--nthreads", "1",
                                       "--no-dashboard", "--name", f"bench{i}"],
                                      env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    return address, procs


def idle_cost(seconds: float = 10.0) -> None:
    """CPU an idle LocalCluster of 2 workers takes per second, with Dask's
    default settings and with ccbench's (OWN_CONFIG): what the cluster itself
    takes from the runs on this machine."""
    import logging

    import dask
    import distributed
    import psutil

    from ccbench.executor.cluster import OWN_CONFIG

    me = psutil.Process()

    def cpu() -> float:
        total = 0.0
        for p in [me] + me.children(recursive=True):
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
        return total

    for label, config in (("Dask's defaults", {}), ("ccbench's settings", OWN_CONFIG)):
        with dask.config.set(config):
            cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None,
                                               silence_logs=logging.CRITICAL)
        try:
            time.sleep(2)
            c0, t0 = cpu(), time.perf_counter()
            time.sleep(seconds)
            per_s = (cpu() - c0) / (time.perf_counter() - t0)
        finally:
            cluster.close()
        print(f"  idle local:2 cluster, {label}: {per_s * 1e3:.0f} ms of CPU per second")


def cpu_seconds() -> dict[int, float]:
    """CPU time so far of this process (all its threads, ended ones too), of its
    waited-for children (0), and of each live descendant (by pid)."""
    import resource

    import psutil

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    got = {-1: own.ru_utime + own.ru_stime, 0: kids.ru_utime + kids.ru_stime}
    for p in psutil.Process().children(recursive=True):
        try:
            t = p.cpu_times()
            got[p.pid] = t.user + t.system
        except psutil.Error:
            pass
    return got


def cpu_used(before: dict[int, float]) -> float:
    """CPU seconds this process and its descendants used since ``before``
    (a descendant that ended unwaited-for in between is missed)."""
    now = cpu_seconds()
    return sum(v - before.get(k, 0.0) for k, v in now.items())


def measure(name: str, study, runs, backend, out: Path, tmp: Path) -> tuple:
    """One sweep by executor ``name``: (wall s, cluster start-up s, gaps, run walls, CPU s of the sweep)."""
    startup = 0.0
    if name in ("serial", "jobs2"):
        c0 = cpu_seconds()
        t0 = time.perf_counter()
        execute(study, runs, backend, out, jobs=1 if name == "serial" else 2)
        wall = time.perf_counter() - t0
        cpu = cpu_used(c0)  # the pool's workers were waited for: in RUSAGE_CHILDREN
    elif name == "local2":
        # the user's path (ccbench run --cluster local:2): the client runs runs
        # while the cluster starts, so start-up and sweep overlap; "start-up"
        # is the time until the runner got the cluster; the sweep ends when
        # execute returns (store closed, as for serial), the cluster's shutdown is left out
        from ccbench.executor import cluster, local
        from ccbench.executor.cluster_config import resolve

        marks: dict[str, float] = {}
        call, run_all = cluster.ClusterRunner.__call__, local.execute

        def timed_runner(self, *a):
            marks["start"] = time.perf_counter()
            return call(self, *a)

        def timed_execute(*a, **kw):
            try:
                return run_all(*a, **kw)
            finally:
                marks["end"] = time.perf_counter()

        cluster.ClusterRunner.__call__, local.execute = timed_runner, timed_execute
        c0 = cpu_seconds()
        t0 = time.perf_counter()
        try:
            cluster.execute_on_cluster(study, runs, backend, out, resolve("local:2"))
        finally:
            cluster.ClusterRunner.__call__, local.execute = call, run_all
        startup, wall = marks["start"] - t0, marks["end"] - marks["start"]
        cpu = cpu_used(c0)  # start-up included; the workers were waited for: in RUSAGE_CHILDREN
    else:
        from ccbench.executor.cluster import ClusterRunner, open_cluster, preflight
        from ccbench.executor.cluster_config import resolve

        s0 = time.perf_counter()
        address, procs = start_scheduler_and_workers(out.with_name(out.name + "-dask"), 2)
        cfg = resolve(address)
        handle = open_cluster(cfg)
        try:
            while len(handle.client.scheduler_info(n_workers=-1)["workers"]) < 2:
                time.sleep(0.1)
            preflight(handle, "sim", ())
            startup = time.perf_counter() - s0
            c0 = cpu_seconds()
            t0 = time.perf_counter()
            execute(study, runs, backend, out, runner=ClusterRunner(handle, "sim"))
            wall = time.perf_counter() - t0  # the sweep, not the shutdown
            cpu = cpu_used(c0)  # client, scheduler and workers, while they all live
        finally:
            handle.close()
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(20)
    g, w, sim = gaps(out)
    return wall, startup, g, w, cpu, sim


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="serial,jobs2,local2,sched2", help="comma-separated subset")
    ap.add_argument("--rounds", type=int, default=1,
                    help="repeat the executors in turn N times and report medians (a shared machine's load varies)")
    ap.add_argument("--idle-cost", action="store_true", help="only: the CPU an idle local:2 cluster takes")
    args = ap.parse_args()
    if args.idle_cost:
        print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        idle_cost()
        return
    which = args.only.split(",")
    # workers (pool, LocalCluster, dask worker) import _timed_backend by name
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(Path(ccbench.__file__).parents[1]), str(HERE)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    study = parse_study(STUDY, filename="sweep-scale.toml")
    runs = study.runs()
    backend = TimedSim()
    tmp = Path(tempfile.mkdtemp(prefix="ccbench-sweep-scale-"))
    print(f"ccbench {ccbench.__version__}; {len(runs)} sim runs; {os.cpu_count()} CPUs; "
          f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    rounds: list[dict] = []  # per round: name → (wall, startup, gaps, run walls)
    for r in range(args.rounds):
        got = {}
        for name in which:
            got[name] = measure(name, study, runs, backend, tmp / f"{name}-{r}", tmp)
            print(f"  round {r + 1}: {name}: {got[name][0]:.2f} s + start-up {got[name][1]:.2f} s; "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
        rounds.append(got)

    def ratios(name: str, with_startup: bool) -> list[float]:
        return [g["serial"][0] / (g[name][0] + (g[name][1] if with_startup else 0.0)) for g in rounds]

    med = statistics.median
    has_serial = "serial" in which
    pool_gaps = [x for g in rounds for x in g["jobs2"][2]] if "jobs2" in which else []
    pool_gap = med(pool_gaps) if pool_gaps else None
    label = {"serial": "serial", "jobs2": "--jobs 2", "local2": "--cluster local:2",
             "sched2": "scheduler + 2 workers"}
    print()
    if args.rounds > 1:
        print(f"medians over {args.rounds} rounds (each ratio within its round, then the median):")
    print(f"{'executor':24} {'wall s':>7} {'start-up s':>10} {'runs/s':>7} {'x serial':>8} {'w/o start':>9} "
          f"{'run s (med)':>11} {'gap ms med':>10} {'gap ms p90':>10} {'over pool ms':>12} {'CPU ms/run':>10} {'of it sim':>9}")
    for name in which:
        wall, startup = med([g[name][0] for g in rounds]), med([g[name][1] for g in rounds])
        gs = sorted(x for g in rounds for x in g[name][2])
        ws = [x for g in rounds for x in g[name][3]]
        gmed = med(gs) * 1e3 if gs else float("nan")
        p90 = gs[int(0.9 * (len(gs) - 1))] * 1e3 if gs else float("nan")
        over = f"{gmed - pool_gap * 1e3:+.1f}" if pool_gap is not None and name not in ("serial", "jobs2") else "–"
        ratio = f"{med(ratios(name, True)):.2f}" if has_serial else "–"  # the target counts the start-up
        bare = f"{med(ratios(name, False)):.2f}" if has_serial else "–"
        print(f"{label[name]:24} {wall:7.2f} {startup:10.2f} {len(runs) / (wall + startup):7.2f} {ratio:>8} "
              f"{bare:>9} {med(ws):11.3f} {gmed:10.1f} {p90:10.1f} {over:>12} "
              f"{med([g[name][4] for g in rounds]) / len(runs) * 1e3:10.0f} "
              f"{med([g[name][5] for g in rounds]) / len(runs) * 1e3:9.0f}")
    print(f"\nload average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; results in {tmp}")


if __name__ == "__main__":
    main()
