"""`ccbench validate`: how far is the simulator from the real Linux kernel?

    ccbench validate [--grid quick|medium|full | --quick] [--reps N] [--duration T]
                     [--out DIR] [--jobs N] [--retry-suspect N] [--rerun-sim] [--no-run]
                     [--format table|csv|json|markdown]

A grid of small dumbbell scenarios (one FIFO bottleneck, N bulk flows of one
algorithm on one sender host, the return path mirrored without loss) is
written as one study text — every axis swept, so a scenario has the same run
ids whatever grid it was run in — parsed by ccbench.spec (every value
validated like a study file's), and run on both backends through the normal
executor into one results store (default ``results/validate/``). Like any
study it resumes: runs already finished are skipped. Sim runs go first (in
``--jobs`` worker processes), then the linux runs one at a time (they are
real time and CPU-sensitive). A linux run the backend marks *suspect* (the
emulator was late, a queue outside it dropped, a flow was limited by
something other than the network...) is run again up to ``--retry-suspect``
times; suspect runs that remain are left out of every comparison and
counted in the report.

Per scenario and metric: the median over repetitions on each backend, the
min–max spread, the ratio sim/linux (or the difference, for retransmissions
and JFI), whether it is within tolerance, and whether the difference
*exceeds the spread* across repetitions (ccbench.analysis.compare's rule:
|Δ median| > range(sim) + range(linux) and > 1 %). Metrics (all flows of a
run together):

  goodput_steady     Σ goodput after the warm-up (max(20 % of the run, 2 s)),
                     from the cumulative delivered-bytes samples     ±5 %  (judged)
  rtt_mean_steady    mean of the sampled smoothed RTT (srtt_us of the samples
                     table) after the warm-up, averaged over flows   ±10 % (judged)
  goodput            Σ goodput over the whole active time (flows table)  ±5 %
  goodput_flow_min_steady / _max_steady: the slowest / fastest flow  ±5 %
  rtt_mean           sampled srtt over the whole active time         ±10 %
  rtt_mean_summary   the backends' own rtt_mean_us (no tolerance: sim averages
                     every RTT sample, linux the sampled srtt — not like with like)
  retrans_pct        100 · Σ retransmitted / Σ sent segments   ±0.5 percentage points
  jfi_steady         Jain's index of the flows' steady goodput    ±0.05 (absolute)

The sim runs get ``tcp.kernel_hz`` = this kernel's CONFIG_HZ (read from
/proc/config.gz) so that CUBIC's jiffies clock matches the Linux hosts'; it
is applied to their configs after the run ids are fixed, so both halves
still pair (``sim_tcp`` in validation.json says what was applied).

A scenario *agrees* when both judged metrics are within tolerance. Mean RTT
is compared on the srtt series of the samples table on both backends
because that is all Linux exposes (tcpi_rtt, sampled every interval), while
the simulator's summary rtt_mean_us is over every RTT sample.

Outputs in the results directory: ``validation.csv`` (one row per scenario ×
metric), ``validation.json`` (the same plus run counts, settings and the
machine) and ``validation.html`` (self-contained, the report's style: a
ratio plot, the table, per scenario the time series of both backends).
Exit status: 0 every scenario agrees, 1 some scenario disagrees or has no
usable runs on a backend, 2 usage error, 130 interrupted.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import platform
import shlex
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

STUDY_NAME = "validate"
KERNEL_HZ = (100, 250, 300, 1000)  # the simulator's tcp.kernel_hz values
DEFAULT_OUT = Path("results") / "validate"
SAMPLE_INTERVAL = "100ms"
START_JITTER = "10ms"  # each flow starts up to this much later (seeded): repetitions differ on sim too
WARMUP_FRACTION = 0.2
WARMUP_MIN_S = 2.0


@dataclass(frozen=True)
class Grid:
    """The scenarios of one grid: the product of the axes."""

    name: str
    ccas: tuple[str, ...]
    flows: tuple[int, ...]
    rates: tuple[str, ...]
    rtts: tuple[str, ...]
    buffers: tuple[str, ...]
    losses: tuple[str, ...]
    reps: int
    duration: str
    purpose: str = ""

    @property
    def size(self) -> int:
        return (len(self.ccas) * len(self.flows) * len(self.rates) * len(self.rtts) * len(self.buffers)
                * len(self.losses))

    def describe(self) -> str:
        def j(xs: Sequence[Any]) -> str:
            return "/".join(str(x) for x in xs)

        return (f"{j(self.ccas)} × {j(self.flows)} flows × {j(self.rates)} × RTT {j(self.rtts)} × buffer "
                f"{j(self.buffers)} × loss {j(self.losses)}")


GRIDS: dict[str, Grid] = {
    # The issue's grid: 216 scenarios (about 3 h of linux runs with 3 × 15 s).
    "full": Grid("full", ("reno", "cubic", "bbr"), (1, 2, 4), ("10Mbit", "100Mbit"), ("10ms", "40ms"),
                 ("0.5bdp", "1bdp", "4bdp"), ("0%", "1%"), reps=3, duration="15s",
                 purpose="the whole validation grid"),
    # What fits in about 25 minutes of linux runs: 48 scenarios.
    "medium": Grid("medium", ("reno", "cubic", "bbr"), (1, 2), ("10Mbit", "100Mbit"), ("10ms", "40ms"), ("1bdp",),
                   ("0%", "1%"), reps=2, duration="15s", purpose="the grid of docs/validation/"),
    # The test grid (tests/test_validate.py): 2 scenarios, about 70 s of linux runs. Three repetitions,
    # so that the median survives one odd run (seen: a cubic run on a loaded machine that lost 109
    # packets in one burst at 2 s, which moved its mean RTT by 20 %).
    "quick": Grid("quick", ("reno", "cubic"), (1,), ("100Mbit",), ("20ms",), ("1bdp",), ("0%",), reps=3,
                  duration="10s", purpose="make test"),
}


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str  # bps | us | % | ''
    kind: str  # rel: judged on the ratio sim/linux; abs: on the difference
    tolerance: Optional[float]  # None: reported only
    judged: bool  # decides the scenario's verdict
    doc: str


METRICS: tuple[Metric, ...] = (
    Metric("goodput_steady", "bps", "rel", 0.05, True,
           "Σ goodput of the flows after the warm-up (cumulative delivered-bytes samples)"),
    Metric("rtt_mean_steady", "us", "rel", 0.10, True,
           "mean of the sampled smoothed RTT (samples.srtt_us) after the warm-up, mean over flows"),
    Metric("goodput", "bps", "rel", 0.05, False, "Σ goodput over the whole active time (flows table)"),
    Metric("goodput_flow_min_steady", "bps", "rel", 0.05, False, "the slowest flow's goodput after the warm-up"),
    Metric("goodput_flow_max_steady", "bps", "rel", 0.05, False, "the fastest flow's goodput after the warm-up"),
    Metric("rtt_mean", "us", "rel", 0.10, False, "mean of the sampled srtt over the whole active time"),
    Metric("rtt_mean_summary", "us", "rel", None, False,
           "the backend's rtt_mean_us (sim: every RTT sample; linux: sampled srtt) — not like with like"),
    Metric("retrans_pct", "%", "abs", 0.5, False, "100 · Σ retransmitted / Σ sent segments (percentage points)"),
    Metric("jfi_steady", "", "abs", 0.05, False, "Jain's index over the flows' goodput after the warm-up"),
)
METRIC = {m.name: m for m in METRICS}
JUDGED = tuple(m.name for m in METRICS if m.judged)


# -- the grid as a study ---------------------------------------------------------------


def _toml_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)  # a TOML basic string


def _toml_list(xs: Sequence[Any]) -> str:
    return "[" + ", ".join(_toml_str(x) if isinstance(x, str) else str(x) for x in xs) + "]"


def _half_delay(rtt: str) -> str:
    from ccbench.spec import parse_time

    ns = parse_time(rtt)
    if ns % 2_000_000 == 0:
        return f"{ns // 2_000_000}ms"
    return f"{ns // 2}ns" if ns % 2_000 else f"{ns // 2_000}us"


def study_text(grid: Grid, duration: str, reps: int) -> str:
    """The grid as study text: every axis swept (also single values) so run ids
    depend only on the scenario, the duration and the repetition."""
    rtt_cases = "\n".join(
        f"{_toml_str(r)} = {{ \"topology.bottleneck.delay\" = {_toml_str(_half_delay(r))} }}" for r in grid.rtts)
    return f"""# Generated by `ccbench validate` (grid {grid.name}): {grid.describe()}.
# Base RTT = 2 x the bottleneck's one-way delay (access links 10 Gbit/s, 0 ms);
# the return path mirrors the bottleneck without loss.
[study]
name = "{STUDY_NAME}"
description = "sim against linux: one FIFO bottleneck, N bulk flows of one algorithm"
duration = {_toml_str(duration)}
repetitions = {reps}
seed = 1
sample_interval = "{SAMPLE_INTERVAL}"

[topology]
senders = 1

[topology.bottleneck]
rate = {_toml_str(grid.rates[0])}
delay = {_toml_str(_half_delay(grid.rtts[0]))}
buffer = {_toml_str(grid.buffers[0])}
loss = {_toml_str(grid.losses[0])}
qdisc = "fifo"

[[flows]]
cca = {_toml_str(grid.ccas[0])}
count = {grid.flows[0]}
kind = "bulk"
start_jitter = "{START_JITTER}"

[sweep]
"flows.0.cca" = {_toml_list(grid.ccas)}
"flows.0.count" = {_toml_list(grid.flows)}
"topology.bottleneck.rate" = {_toml_list(grid.rates)}
"topology.bottleneck.buffer" = {_toml_list(grid.buffers)}
"topology.bottleneck.loss" = {_toml_list(grid.losses)}

[sweep.cases.rtt]
{rtt_cases}
"""


@dataclass
class Plan:
    grid: Grid
    duration: str
    reps: int
    text: str
    studies: dict  # backend -> Study
    duration_us: int
    warmup_us: int
    # tcp settings given to the sim runs only, outside their run ids: the
    # Linux hosts' CONFIG_HZ (kernel_hz), which the simulator should match
    # but the study text cannot carry without changing every run id.
    sim_tcp: dict = field(default_factory=dict)

    def runs(self, backend: str) -> list:
        runs = self.studies[backend].runs()
        if backend == "sim":
            for r in runs:
                r.config["tcp"].update(self.sim_tcp)
        return runs

    def run_ids(self) -> list[str]:
        return [r.run_id for b in ("sim", "linux") for r in self.runs(b)]


def warmup_us(duration_us: int) -> int:
    """The warm-up skipped by the steady metrics: max(20 % of the run, 2 s), at most half the run."""
    return int(min(max(WARMUP_FRACTION * duration_us, WARMUP_MIN_S * 1e6), duration_us / 2))


def plan(grid: Grid | str, duration: Optional[str] = None, reps: Optional[int] = None) -> Plan:
    """The grid's study on both backends. Raises StudyError/UsageError on bad values."""
    from ccbench.errors import UsageError
    from ccbench.spec import kernel, parse_study

    if isinstance(grid, str):
        if grid not in GRIDS:
            raise UsageError(f"--grid: unknown grid {grid!r} (allowed: {', '.join(GRIDS)})")
        grid = GRIDS[grid]
    duration = duration or grid.duration
    reps = grid.reps if reps is None else reps
    if reps < 1:
        raise UsageError(f"--reps: got {reps}; allowed: a number of repetitions >= 1")
    text = study_text(grid, duration, reps)
    studies = {b: parse_study(text, filename=f"<validate grid {grid.name}>", backend=b) for b in ("sim", "linux")}
    first = studies["sim"].runs()[0]
    dur_us = int(first.config["duration_ns"]) // 1000
    hz = kernel.config_hz()
    sim_tcp = {"kernel_hz": hz} if hz in KERNEL_HZ else {}
    return Plan(grid, duration, reps, text, studies, dur_us, warmup_us(dur_us), sim_tcp)


# -- running -------------------------------------------------------------------------------


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


class _LoadWatch:
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


def _set_aside(out: Path, run_ids: Sequence[str], why: str, only_suspect: bool = True) -> list[str]:
    """Mark runs among ``run_ids`` (only the suspect ones, or every finished
    one) failed so the executor runs them again (the new run replaces the row
    and its data); returns them."""
    from ccbench.store import DB_FILENAME, Store

    if not (out / DB_FILENAME).exists():
        return []
    with Store(out) as store:
        ids = [r.run_id for r in store.runs(run_ids=run_ids)
               if r.status == "suspect" or (not only_suspect and r.status == "ok")]
        for rid in ids:
            store.con.execute("UPDATE runs SET status = 'failed', error = ? || coalesce(error, '') WHERE run_id = ?",
                              [f"set aside to be run again by ccbench validate ({why}): ", rid])
    return ids


def _set_aside_suspect(out: Path, run_ids: Sequence[str]) -> list[str]:
    return _set_aside(out, run_ids, "suspect")


def execute_plan(p: Plan, out: Path, *, jobs: int = 1, retry_suspect: int = 1, console: Any = None,
                 log: Optional[RunLog] = None) -> RunLog:
    """Run what is not finished yet: every sim run, then every linux run (serially)."""
    from ccbench import backends
    from ccbench.executor import execute
    from ccbench.executor.progress import make_progress

    log = log or RunLog()
    progress = (lambda: make_progress(console)) if console is not None else (lambda: None)
    sim, linux = backends.get("sim"), backends.get("linux")
    sim.check()
    linux.check()
    s = execute(p.studies["sim"], p.runs("sim"), sim, out, jobs=jobs, progress=progress())
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
    linux_runs = p.runs("linux")
    ids = [r.run_id for r in linux_runs]
    for attempt in range(retry_suspect + 1):
        inner = progress()
        watch = _LoadWatch(inner) if inner is not None else None
        s = execute(p.studies["linux"], linux_runs, linux, out, jobs=1, progress=watch)
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
        again = _set_aside_suspect(out, ids)
        if not again:
            break
        log.suspect_retried += len(again)
        if console is not None:
            console.print(f"{len(again)} linux runs came back suspect; running them again "
                          f"(retry {attempt + 1} of {retry_suspect})", soft_wrap=True)
    return log


# -- analysis ------------------------------------------------------------------------------


def _finite(x: Any) -> Optional[float]:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def run_values(run: Any, warmup: int) -> dict[str, Any]:
    """The METRICS of one run (RunData), plus the per-flow steady goodput."""
    from ccbench.analysis.metrics import flow_metrics, flow_stop
    from ccbench.analysis.summary import jain_index

    window = (float(warmup), float(run.duration_us))
    fms = [flow_metrics(run, f, window) for f in sorted(run.flows, key=lambda f: f["flow_id"])]

    def srtt_mean(flow: dict, t0: float, t1: float) -> Optional[float]:
        s = run.series.get(int(flow["flow_id"]))
        if s is None or s.srtt_us is None:
            return None
        keep = (s.time_us >= t0) & (s.time_us <= t1) & np.isfinite(s.srtt_us) & (s.srtt_us > 0)
        return float(np.mean(s.srtt_us[keep])) if keep.any() else None

    def mean(xs: Sequence[Optional[float]]) -> Optional[float]:
        v = [x for x in xs if x is not None]
        return sum(v) / len(v) if v else None

    steady = [f.goodput_steady_bps for f in fms]
    whole = [f.goodput_bps for f in fms]
    sent = sum(f.sent_segs or 0 for f in fms)
    rtx = sum(f.retrans_segs or 0 for f in fms)
    flows = sorted(run.flows, key=lambda f: f["flow_id"])
    have_steady = all(x is not None for x in steady) and bool(steady)
    return {
        "goodput_steady": sum(steady) if have_steady else None,
        "rtt_mean_steady": mean([srtt_mean(f, max(window[0], float(f.get("start_us") or 0)),
                                           min(window[1], flow_stop(run, f))) for f in flows]),
        "goodput": sum(x for x in whole if x is not None) if any(x is not None for x in whole) else None,
        "goodput_flow_min_steady": min(steady) if have_steady else None,
        "goodput_flow_max_steady": max(steady) if have_steady else None,
        "rtt_mean": mean([srtt_mean(f, float(f.get("start_us") or 0), flow_stop(run, f)) for f in flows]),
        "rtt_mean_summary": mean([_finite(f.get("rtt_mean_us")) for f in flows]),
        "retrans_pct": 100.0 * rtx / sent if sent else None,
        "jfi_steady": jain_index(steady) if have_steady and sum(steady) > 0 else None,
        "_flow_goodput_steady": steady,
    }


@dataclass
class MetricRow:
    metric: Metric
    sim: Any  # Spread
    linux: Any  # Spread
    ratio: Optional[float]
    diff: Optional[float]
    within: Optional[bool]  # None: no tolerance or no data
    exceeds_spread: Optional[bool]

    def as_dict(self) -> dict:
        def sp(s: Any) -> dict:
            return {k: getattr(s, k) for k in ("n", "median", "min", "max", "values")}

        m = self.metric
        return {"metric": m.name, "unit": m.unit, "judged": m.judged, "tolerance": m.tolerance,
                "tolerance_kind": "relative" if m.kind == "rel" else "absolute",
                "sim": sp(self.sim), "linux": sp(self.linux), "ratio": self.ratio, "diff": self.diff,
                "within": self.within, "exceeds_spread": self.exceeds_spread}


@dataclass
class Scenario:
    config_id: str
    params: dict  # cca, flows, rate, rtt, buffer, loss (as written)
    rows: dict[str, MetricRow]
    runs: dict[str, dict]  # backend -> {ok, suspect, failed, missing, run_ids, suspect_notes}
    series: dict[str, list]  # backend -> usable RunData (for the figures)

    @property
    def label(self) -> str:
        p = self.params
        n = p["flows"]
        return f"{p['cca']} {n} flow{'s' if str(n) != '1' else ''} {p['rate']} {p['rtt']} {p['buffer']} {p['loss']}"

    @property
    def verdict(self) -> str:
        """agree | disagree | no data"""
        judged = [self.rows[k].within for k in JUDGED]
        if any(w is None for w in judged):
            return "no data"
        return "agree" if all(judged) else "disagree"

    def outside(self, judged_only: bool = False) -> list[str]:
        return [k for k, r in self.rows.items() if r.within is False and (r.metric.judged or not judged_only)]

    def as_dict(self) -> dict:
        runs = {b: {k: v for k, v in d.items()} for b, d in self.runs.items()}
        return {"scenario": self.label, "config_id": self.config_id, "params": self.params,
                "verdict": self.verdict, "outside_tolerance": self.outside(),
                "runs": runs, "metrics": {k: r.as_dict() for k, r in self.rows.items()}}


@dataclass
class Validation:
    grid: Grid
    duration_us: int
    warmup_us: int
    reps: int
    scenarios: list[Scenario]
    out: Path
    log: Optional[RunLog] = None
    machine: dict = field(default_factory=dict)
    sim_tcp: dict = field(default_factory=dict)  # Plan.sim_tcp

    def counts(self) -> dict[str, int]:
        out = {"agree": 0, "disagree": 0, "no data": 0}
        for s in self.scenarios:
            out[s.verdict] += 1
        return out

    def suspect_runs(self) -> list[tuple[str, str, str]]:
        """(scenario, run id, note) of every suspect run left out."""
        return [(s.label, rid, note) for s in self.scenarios for b in ("sim", "linux")
                for rid, note in s.runs[b].get("suspect_notes", {}).items()]

    def as_dict(self) -> dict:
        g = self.grid
        return {
            "grid": {"name": g.name, "ccas": g.ccas, "flows": g.flows, "rates": g.rates, "rtts": g.rtts,
                     "buffers": g.buffers, "losses": g.losses, "scenarios": g.size},
            "duration_s": self.duration_us / 1e6, "warmup_s": self.warmup_us / 1e6, "repetitions": self.reps,
            "tolerances": {m.name: {"tolerance": m.tolerance, "kind": "relative" if m.kind == "rel" else "absolute",
                                    "judged": m.judged, "definition": m.doc} for m in METRICS},
            "spread_rule": "exceeds_spread: |median_linux - median_sim| > range_sim + range_linux and > 1 % "
                           "of the larger |median| (ccbench.analysis.compare)",
            "counts": self.counts(),
            "machine": self.machine,
            "sim_tcp": self.sim_tcp,
            "invocation": self.log.as_dict() if self.log else None,
            "results": str(self.out),
            "scenarios": [s.as_dict() for s in self.scenarios],
        }


def machine_info() -> dict:
    info: dict[str, Any] = {"cpus": os.cpu_count(), "kernel": platform.release(),
                            "python": sys.version.split()[0],
                            "loadavg_at_analysis": [round(x, 2) for x in os.getloadavg()]}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        mem = Path("/proc/meminfo").read_text().split("\n", 1)[0].split()
        info["memory_gib"] = round(int(mem[1]) / 2**20, 1)
    except (OSError, IndexError, ValueError):
        pass
    from ccbench import __version__

    info["ccbench"] = __version__
    return info


def _scenario_params(params: dict) -> dict:
    return {"cca": params.get("flows.0.cca"), "flows": int(params.get("flows.0.count", 1)),
            "rate": params.get("topology.bottleneck.rate"), "rtt": params.get("cases.rtt"),
            "buffer": params.get("topology.bottleneck.buffer"), "loss": params.get("topology.bottleneck.loss")}


def compare_spreads(m: Metric, s: Any, l: Any) -> MetricRow:
    from ccbench.analysis.compare import exceeds_spread

    if not s.n or not l.n:
        return MetricRow(m, s, l, None, None, None, None)
    ratio = s.median / l.median if l.median else None
    diff = s.median - l.median
    within: Optional[bool] = None
    if m.tolerance is not None:
        if m.kind == "rel":
            within = None if ratio is None else abs(ratio - 1.0) <= m.tolerance + 1e-12
        else:
            within = abs(diff) <= m.tolerance + 1e-12
    return MetricRow(m, s, l, ratio, diff, within, exceeds_spread(l, s))


def analyse(p: Plan, out: Path, log: Optional[RunLog] = None) -> "Validation":
    """Compare the two backends per scenario from the store in ``out``."""
    from ccbench.analysis.data import load_runs
    from ccbench.analysis.stats import spread
    from ccbench.store import Store

    planned = {b: p.runs(b) for b in ("sim", "linux")}
    with Store.open_existing(out) as store:
        ids = [r.run_id for b in planned for r in planned[b]]
        records = {r.run_id: r for r in store.runs(run_ids=ids)}
        data = {r.run_id: r for r in load_runs(store, run_ids=ids)}
    order: list[str] = []
    params: dict[str, dict] = {}
    for r in planned["sim"]:
        if r.config_id not in params:
            order.append(r.config_id)
            params[r.config_id] = r.params
    scenarios = []
    for cid in order:
        runs: dict[str, dict] = {}
        values: dict[str, list[dict]] = {}
        usable: dict[str, list] = {}
        for b in ("sim", "linux"):
            mine = [r for r in planned[b] if r.config_id == cid]
            info = {"planned": len(mine), "ok": 0, "suspect": 0, "failed": 0, "missing": 0, "run_ids": [],
                    "suspect_notes": {}}
            values[b], usable[b] = [], []
            for r in mine:
                rec = records.get(r.run_id)
                if rec is None:
                    info["missing"] += 1
                    continue
                info[rec.status] = info.get(rec.status, 0) + 1
                info["run_ids"].append(r.run_id)
                if rec.status == "suspect":
                    info["suspect_notes"][r.run_id] = (rec.error or "").strip().splitlines()[0] if rec.error else ""
                if rec.status == "ok" and r.run_id in data:
                    usable[b].append(data[r.run_id])
                    values[b].append(run_values(data[r.run_id], p.warmup_us))
            runs[b] = info
        rows = {}
        for m in METRICS:
            rows[m.name] = compare_spreads(m, spread(v[m.name] for v in values["sim"]),
                                           spread(v[m.name] for v in values["linux"]))
        scenarios.append(Scenario(cid, _scenario_params(params[cid]), rows, runs, usable))
    return Validation(p.grid, p.duration_us, p.warmup_us, p.reps, scenarios, out, log, machine_info(), p.sim_tcp)


# -- output --------------------------------------------------------------------------------


def _fmt_val(m: Metric, v: Optional[float]) -> str:
    if v is None:
        return "–"
    if m.unit == "bps":
        return f"{v / 1e6:.2f}"
    if m.unit == "us":
        return f"{v / 1e3:.2f}"
    if m.unit == "%":
        return f"{v:.2f}"
    return f"{v:.3f}"


CSV_COLUMNS = ("scenario", "config_id", "cca", "flows", "rate", "rtt", "buffer", "loss", "verdict", "metric", "unit",
               "judged", "tolerance", "tolerance_kind", "sim_median", "sim_min", "sim_max", "sim_n",
               "linux_median", "linux_min", "linux_max", "linux_n", "ratio", "diff", "within", "exceeds_spread",
               "linux_suspect", "linux_failed")


def csv_text(v: Validation) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)

    def c(x: Any) -> Any:
        if x is None:
            return ""
        if isinstance(x, bool):
            return int(x)
        if isinstance(x, float):
            return f"{x:.6g}"
        return x

    for s in v.scenarios:
        p = s.params
        for name, r in s.rows.items():
            m = r.metric
            w.writerow([c(x) for x in (
                s.label, s.config_id, p["cca"], p["flows"], p["rate"], p["rtt"], p["buffer"], p["loss"], s.verdict,
                name, m.unit, m.judged, m.tolerance, "relative" if m.kind == "rel" else "absolute",
                r.sim.median, r.sim.min, r.sim.max, r.sim.n, r.linux.median, r.linux.min, r.linux.max, r.linux.n,
                r.ratio, r.diff, r.within, r.exceeds_spread, s.runs["linux"]["suspect"], s.runs["linux"]["failed"])])
    return buf.getvalue()


def json_text(v: Validation) -> str:
    from ccbench.report.html import _nan_free

    return json.dumps(_nan_free(v.as_dict()), indent=2, default=str) + "\n"


def summary_line(v: Validation) -> str:
    c = v.counts()
    n = len(v.scenarios)
    text = (f"{c['agree']} of {n} scenarios agree (sim within ±5 % of linux on goodput and ±10 % on mean RTT, "
            f"after a {v.warmup_us / 1e6:g} s warm-up)")
    if c["disagree"]:
        text += f"; {c['disagree']} disagree"
    if c["no data"]:
        text += f"; {c['no data']} without usable runs on a backend"
    sus = len(v.suspect_runs())
    if sus:
        text += f"; {sus} suspect linux runs left out"
    return text


def table(v: Validation) -> Any:
    """A rich table, one row per scenario."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=escape(f"ccbench validate, grid {v.grid.name}: sim vs linux, median over {v.reps} repetitions"),
              title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), show_edge=False,
              caption=escape(
                  f"goodput = Σ over flows and RTT = mean sampled srtt, both after {v.warmup_us / 1e6:g} s of warm-up; "
                  "ratio = sim/linux, green within tolerance (goodput ±5 %, RTT ±10 %, retx ±0.5 points, "
                  "JFI ±0.05), red outside; * = the difference exceeds the spread over repetitions; "
                  "runs = usable sim/linux runs (suspect linux runs are left out)"),
              caption_justify="left")
    for col, just in (("cca", "l"), ("n", "r"), ("rate", "r"), ("RTT", "r"), ("buffer", "r"), ("loss", "r"),
                      ("goodput Mbit/s\nsim  linux", "r"), ("ratio", "r"), ("gp whole\nratio", "r"),
                      ("RTT ms\nsim  linux", "r"), ("ratio", "r"), ("retx %\nsim  linux", "r"),
                      ("JFI\nsim  linux", "r"), ("runs", "r"), ("verdict", "l")):
        t.add_column(col, justify="left" if just == "l" else "right", no_wrap=True)

    def ratio(r: MetricRow) -> str:
        if r.ratio is None:
            return "–"
        txt = f"{r.ratio:.3f}" + ("*" if r.exceeds_spread else "")
        if r.within is None:
            return txt
        return f"[green]{txt}[/]" if r.within else f"[red]{txt}[/]"

    def pair(r: MetricRow, cmp: bool = False) -> str:
        txt = f"{_fmt_val(r.metric, r.sim.median)}  {_fmt_val(r.metric, r.linux.median)}"
        if cmp and r.within is not None:
            txt = f"[green]{txt}[/]" if r.within else f"[red]{txt}[/]"
        return txt

    colour = {"agree": "green", "disagree": "red", "no data": "yellow"}
    for s in v.scenarios:
        p, rows = s.params, s.rows
        sim_n, lin = rows["goodput_steady"].sim.n, s.runs["linux"]
        runs = f"{sim_n}/{lin['ok']}"
        extra = [f"{lin['suspect']} sus" if lin["suspect"] else "", f"{lin['failed']} failed" if lin["failed"] else "",
                 f"{lin['missing']} not run" if lin["missing"] else ""]
        runs += "".join(f" ({x})" for x in extra if x)
        verdict = f"[{colour[s.verdict]}]{s.verdict}[/]"
        also = [k for k in s.outside() if k not in JUDGED and k in ("retrans_pct", "jfi_steady")]
        if also:
            verdict += escape(" (" + ", ".join(a.replace("_steady", "").replace("_pct", "") for a in also) + ")")
        t.add_row(escape(str(p["cca"])), str(p["flows"]), escape(str(p["rate"])), escape(str(p["rtt"])),
                  escape(str(p["buffer"])), escape(str(p["loss"])),
                  pair(rows["goodput_steady"]), ratio(rows["goodput_steady"]), ratio(rows["goodput"]),
                  pair(rows["rtt_mean_steady"]), ratio(rows["rtt_mean_steady"]),
                  pair(rows["retrans_pct"], True), pair(rows["jfi_steady"], True), runs, verdict)
    return t


AXES = ("cca", "flows", "rate", "rtt", "buffer", "loss")


def markdown_summary(v: Validation) -> str:
    """Per algorithm: the range of each ratio and the agreement count; then the
    agreement per value of every axis (for docs/validation/README.md)."""

    def rng(xs: list[Optional[float]], fmt: str) -> str:
        xs = [x for x in xs if x is not None]
        return "–" if not xs else f"{format(min(xs), fmt)} – {format(max(xs), fmt)}"

    lines = ["| cca | goodput ratio (steady) | goodput ratio (whole run) | mean RTT ratio | retx % sim − linux "
             "| agree |", "|---|---|---|---|---|---|"]
    for cca in v.grid.ccas:
        sc = [s for s in v.scenarios if str(s.params["cca"]) == cca]
        if not sc:
            continue
        agree = sum(1 for s in sc if s.verdict == "agree")
        lines.append(f"| {cca} | {rng([s.rows['goodput_steady'].ratio for s in sc], '.3f')} "
                     f"| {rng([s.rows['goodput'].ratio for s in sc], '.3f')} "
                     f"| {rng([s.rows['rtt_mean_steady'].ratio for s in sc], '.3f')} "
                     f"| {rng([s.rows['retrans_pct'].diff for s in sc], '+.2f')} | {agree} / {len(sc)} |")
    lines += ["", "| axis | value | agree | goodput outside ±5 % | mean RTT outside ±10 % |", "|---|---|---|---|---|"]
    for axis in AXES:
        values = list(dict.fromkeys(str(s.params[axis]) for s in v.scenarios))
        if len(values) < 2:
            continue
        for val in values:
            sc = [s for s in v.scenarios if str(s.params[axis]) == val]
            agree = sum(1 for s in sc if s.verdict == "agree")
            bad_g = sum(1 for s in sc if s.rows["goodput_steady"].within is False)
            bad_r = sum(1 for s in sc if s.rows["rtt_mean_steady"].within is False)
            lines.append(f"| {axis} | {val} | {agree} / {len(sc)} | {bad_g} | {bad_r} |")
    return "\n".join(lines) + "\n"


def markdown_table(v: Validation) -> str:
    """The per-scenario table as Markdown (for docs/validation/README.md)."""
    head = ("| cca | flows | rate | RTT | buffer | loss | goodput sim / linux (Mbit/s) | ratio | whole-run ratio "
            "| mean RTT sim / linux (ms) | ratio | retx % sim / linux | JFI sim / linux | runs sim/linux | verdict |")
    lines = [head, "|" + "|".join(["---"] * 15) + "|"]

    def ratio(r: MetricRow) -> str:
        if r.ratio is None:
            return "–"
        txt = f"{r.ratio:.3f}" + ("\\*" if r.exceeds_spread else "")
        return txt if r.within is not False else f"**{txt}**"

    def pair(r: MetricRow) -> str:
        txt = f"{_fmt_val(r.metric, r.sim.median)} / {_fmt_val(r.metric, r.linux.median)}"
        return txt if r.within is not False else f"**{txt}**"

    for s in v.scenarios:
        p, rows, lin = s.params, s.rows, s.runs["linux"]
        runs = f"{rows['goodput_steady'].sim.n}/{lin['ok']}" + (f" ({lin['suspect']} suspect)" if lin["suspect"] else "")
        lines.append("| " + " | ".join([
            str(p["cca"]), str(p["flows"]), str(p["rate"]), str(p["rtt"]), str(p["buffer"]), str(p["loss"]),
            pair(rows["goodput_steady"]), ratio(rows["goodput_steady"]), ratio(rows["goodput"]),
            pair(rows["rtt_mean_steady"]), ratio(rows["rtt_mean_steady"]), pair(rows["retrans_pct"]),
            pair(rows["jfi_steady"]), runs, s.verdict if s.verdict != "disagree" else "**disagree**"]) + " |")
    return "\n".join(lines) + "\n"


# -- HTML ----------------------------------------------------------------------------------


def _ratio_figure(v: Validation) -> dict:
    from ccbench.report.html import PALETTE, _layout

    labels = [s.label for s in v.scenarios]
    data = []
    for i, (name, title) in enumerate((("goodput_steady", "goodput (steady)"), ("rtt_mean_steady", "mean RTT (steady)"),
                                       ("goodput", "goodput (whole run)"))):
        ys, lo, hi, text = [], [], [], []
        for s in v.scenarios:
            r = s.rows[name]
            ys.append(r.ratio)
            if r.ratio is not None and r.linux.min and r.linux.max:
                lo.append(r.ratio - r.sim.min / r.linux.max)
                hi.append(r.sim.max / r.linux.min - r.ratio)
            else:
                lo.append(None)
                hi.append(None)
            text.append(f"{s.label}<br>{title}: sim {_fmt_val(r.metric, r.sim.median)}, linux "
                        f"{_fmt_val(r.metric, r.linux.median)} ({'Mbit/s' if r.metric.unit == 'bps' else 'ms'})"
                        f"<br>ratio {'–' if r.ratio is None else f'{r.ratio:.3f}'}"
                        + (" — exceeds the spread" if r.exceeds_spread else ""))
        data.append({"type": "scatter", "mode": "markers", "name": title, "x": labels, "y": ys,
                     "marker": {"size": 9 if i < 2 else 6, "color": PALETTE[i], "symbol": ["circle", "diamond", "x"][i]},
                     "error_y": {"type": "data", "symmetric": False, "array": hi, "arrayminus": lo,
                                 "color": PALETTE[i], "thickness": 1},
                     "text": text, "hoverinfo": "text", "visible": True if i < 2 else "legendonly"})
    lay = _layout("sim / linux per scenario (bars: the range of ratios the repetitions allow)", "", "sim / linux")
    lay["xaxis"]["type"] = "category"
    lay["xaxis"]["tickangle"] = -40
    lay["yaxis"]["rangemode"] = "normal"
    lay["height"] = 480
    lay["margin"]["b"] = 170
    lay["legend"]["y"] = 1.12
    lay["shapes"] = [
        {"type": "rect", "xref": "paper", "yref": "y", "x0": 0, "x1": 1, "y0": 0.9, "y1": 1.1,
         "fillcolor": "rgba(214,39,40,0.06)", "line": {"width": 0}, "layer": "below"},
        {"type": "rect", "xref": "paper", "yref": "y", "x0": 0, "x1": 1, "y0": 0.95, "y1": 1.05,
         "fillcolor": "rgba(31,119,180,0.10)", "line": {"width": 0}, "layer": "below"},
        {"type": "line", "xref": "paper", "yref": "y", "x0": 0, "x1": 1, "y0": 1, "y1": 1,
         "line": {"color": "#555", "width": 1}},
    ]
    return {"data": data, "layout": lay}


def _series_figure(v: Validation, s: Scenario, max_points: int = 600) -> dict:
    from ccbench.analysis.metrics import interval_rates
    from ccbench.report.html import PALETTE, _sig, downsample

    rows = [("Σ goodput (Mbit/s)", "y"), ("cwnd of flow 0 (KB)", "y2"), ("srtt of flow 0 (ms)", "y3"),
            ("bottleneck backlog (KB)", "y4")]
    colour = {"sim": PALETTE[0], "linux": PALETTE[1]}
    data = []
    for b in ("sim", "linux"):
        for k, run in enumerate(s.series.get(b, [])):
            name = f"{b} rep {run.repetition}"
            dash = ("solid", "dot", "dash", "dashdot")[k % 4]
            # Σ goodput per sample interval
            t_all, tot = None, None
            for f in run.flows:
                ser = run.series.get(int(f["flow_id"]))
                if ser is None:
                    continue
                t, rate = interval_rates(ser, float(f.get("start_us") or 0))
                if t_all is None:
                    t_all, tot = t, rate.copy()
                else:
                    n = min(len(tot), len(rate))
                    t_all, tot = t_all[:n], tot[:n] + rate[:n]
            traces = []
            if t_all is not None:
                traces.append((t_all, tot, 1e6, "y"))
            ser0 = run.series.get(0)
            if ser0 is not None:
                traces.append((ser0.time_us, ser0.cwnd_bytes, 1e3, "y2"))
                srtt = np.where(np.asarray(ser0.srtt_us, float) > 0, ser0.srtt_us, np.nan)
                traces.append((ser0.time_us, srtt, 1e3, "y3"))
            q = run.queue.get("bottleneck")
            if q is not None and len(q["time_us"]):
                traces.append((q["time_us"], q["backlog_bytes"], 1e3, "y4"))
            for j, (tt, yy, scale, axis) in enumerate(traces):
                if yy is None or len(yy) == 0:
                    continue
                tt, yy = downsample(np.asarray(tt, float), np.asarray(yy, float), max_points)
                data.append({"type": "scatter", "mode": "lines", "name": name, "legendgroup": name,
                             "showlegend": j == 0, "x": _sig(tt / 1e6, 6), "y": _sig(yy / scale), "yaxis": axis,
                             "line": {"color": colour[b], "width": 1.3, "dash": dash}})
    n = len(rows)
    gap = 0.04
    h = (1 - gap * (n - 1)) / n
    lay: dict = {"height": 820, "margin": {"l": 70, "r": 20, "t": 70, "b": 40}, "hovermode": "x",
                 "title": {"text": s.label, "font": {"size": 14}, "y": 0.99, "yanchor": "top"},
                 "xaxis": {"title": {"text": "time (s)"}, "anchor": "y4", "range": [0, v.duration_us / 1e6]},
                 "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom"},
                 "shapes": [{"type": "rect", "xref": "x", "yref": "paper", "x0": 0, "x1": v.warmup_us / 1e6,
                             "y0": 0, "y1": 1, "fillcolor": "rgba(0,0,0,0.05)", "line": {"width": 0},
                             "layer": "below"}]}
    for k, (title, axis) in enumerate(rows):
        key = "yaxis" if axis == "y" else f"yaxis{axis[1:]}"
        top = 1 - k * (h + gap)
        lay[key] = {"title": {"text": title, "font": {"size": 11}}, "domain": [max(top - h, 0), top],
                    "rangemode": "tozero", "anchor": "x"}
    return {"data": data, "layout": lay}


def html_page(v: Validation) -> str:
    from ccbench.report.html import CSS, JS, _esc, _nan_free, _plotly_js, _table

    figures: dict[str, dict] = {"ratio-figure": _ratio_figure(v)}
    lazy: dict[str, list[str]] = {}
    parts = []
    title = f"ccbench validation: sim against linux (grid {v.grid.name})"
    parts.append(f"<h1>{_esc(title)}</h1>")
    parts.append('<nav><a href="#summary">summary</a><a href="#ratios">ratios</a><a href="#table">table</a>'
                 '<a href="#suspect">suspect runs</a><a href="#scenarios">scenarios</a><a href="#method">method</a></nav>')
    parts.append('<h2 id="summary">Summary</h2>')
    parts.append(f"<p><b>{_esc(summary_line(v))}.</b></p>")
    dis = [s for s in v.scenarios if s.verdict == "disagree"]
    if dis:
        parts.append("<p>Outside tolerance:</p><ul>" + "".join(
            f'<li><a href="#sc-{_esc(s.config_id)}">{_esc(s.label)}</a>: ' + ", ".join(
                f"{_esc(k)} {'ratio ' + format(s.rows[k].ratio, '.3f') if s.rows[k].metric.kind == 'rel' and s.rows[k].ratio is not None else 'diff ' + format(s.rows[k].diff or 0, '+.3g')}"
                + (" (exceeds the spread)" if s.rows[k].exceeds_spread else " (within the spread)")
                for k in s.outside(judged_only=True)) + "</li>" for s in dis) + "</ul>")
    log = v.log.as_dict() if v.log else {}
    m = v.machine
    parts.append(
        f'<p class="muted">Grid <b>{_esc(v.grid.name)}</b>: {_esc(v.grid.describe())}; {v.reps} repetitions of '
        f"{v.duration_us / 1e6:g} s; warm-up {v.warmup_us / 1e6:g} s. Machine: {_esc(m.get('cpus'))} CPUs "
        f"({_esc(m.get('cpu', '?'))}), kernel {_esc(m.get('kernel'))}, load average (1, 5, 15 min) at the "
        f"analysis {_esc(' '.join(str(x) for x in m.get('loadavg_at_analysis', [])))}"
        + (f", before the linux runs {_esc(' '.join(str(x) for x in log['load_before_linux']))}"
           if log.get("load_before_linux") else "")
        + (f", highest during them {log['load_during_linux_max']:.2f}" if log.get("load_during_linux_max") else "")
        + f". Command: <code>{_esc(log.get('command') or 'ccbench validate')}</code>; results "
        f"<code>{_esc(str(v.out))}</code>; ccbench {_esc(m.get('ccbench'))}; made "
        f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M')} UTC.</p>")
    parts.append('<h2 id="ratios">Ratios</h2><div class="plot" id="ratio-figure"></div>'
                 '<p class="muted">Shaded: ±5 % (goodput) and ±10 % (RTT) around 1.</p>')

    # the table
    parts.append('<h2 id="table">Per scenario</h2>')
    headers = ["scenario", "goodput sim", "goodput linux", "ratio", "whole-run ratio", "RTT sim", "RTT linux",
               "ratio", "retx % sim", "retx % linux", "JFI sim", "JFI linux", "runs sim/linux", "verdict"]

    def cell(r: MetricRow, kind: str) -> str:
        if kind == "ratio":
            txt = "–" if r.ratio is None else f"{r.ratio:.3f}"
        else:
            sp = r.sim if kind == "sim" else r.linux
            txt = _fmt_val(r.metric, sp.median)
            if sp.n > 1:
                return (f'<span title="min–max {_fmt_val(r.metric, sp.min)}–{_fmt_val(r.metric, sp.max)}, '
                        f'n={sp.n}">{_esc(txt)}</span><br><span class="muted">{_fmt_val(r.metric, sp.min)}–'
                        f"{_fmt_val(r.metric, sp.max)}</span>")
            return _esc(txt)
        cls = "" if r.within is None else ("" if r.within else "flag")
        star = ' <span title="the difference exceeds the spread over repetitions">*</span>' if r.exceeds_spread else ""
        return f'<span class="{cls}">{_esc(txt)}</span>{star}'

    rows = []
    for s in v.scenarios:
        r = s.rows
        lin = s.runs["linux"]
        runs = f"{r['goodput_steady'].sim.n}/{lin['ok']}" + (f" ({lin['suspect']} suspect)" if lin["suspect"] else "")
        verdict = {"agree": "agree", "disagree": '<span class="flag">disagree</span>',
                   "no data": '<span class="flag">no data</span>'}[s.verdict]
        rows.append([f'<a href="#sc-{_esc(s.config_id)}">{_esc(s.label)}</a>',
                     cell(r["goodput_steady"], "sim"), cell(r["goodput_steady"], "linux"),
                     cell(r["goodput_steady"], "ratio"), cell(r["goodput"], "ratio"),
                     cell(r["rtt_mean_steady"], "sim"), cell(r["rtt_mean_steady"], "linux"),
                     cell(r["rtt_mean_steady"], "ratio"),
                     cell(r["retrans_pct"], "sim"), cell(r["retrans_pct"], "linux"),
                     cell(r["jfi_steady"], "sim"), cell(r["jfi_steady"], "linux"), runs, verdict])
    parts.append('<p class="muted">Goodput in Mbit/s (Σ over flows, after the warm-up), RTT in ms (mean sampled '
                 "srtt after the warm-up); median over repetitions, min–max below. Red: outside tolerance; "
                 "* the difference exceeds the spread over repetitions.</p>")
    parts.append(_table(headers, rows, left=1, cls="summary"))

    # suspect runs
    parts.append('<h2 id="suspect">Suspect runs (left out)</h2>')
    sus = v.suspect_runs()
    if sus:
        parts.append(_table(["scenario", "run", "why"], [[_esc(a), f"<code>{_esc(b)}</code>", _esc(c_)]
                                                         for a, b, c_ in sus], left=3))
    else:
        parts.append("<p>None.</p>")
    if log.get("suspect_retried"):
        parts.append(f"<p class=\"muted\">{log['suspect_retried']} suspect linux runs were run again in this "
                     "invocation.</p>")

    # per scenario
    parts.append('<h2 id="scenarios">Scenarios</h2><p class="muted">Open one for every metric and the time series '
                 "of both backends (blue sim, red linux; the warm-up shaded).</p>")
    for s in v.scenarios:
        fid = f"series-{s.config_id}"
        figures[fid] = _series_figure(v, s)
        lazy[s.config_id] = [fid]
        mrows = []
        for name, r in s.rows.items():
            mm = r.metric
            unit = {"bps": "Mbit/s", "us": "ms", "%": "%", "": ""}[mm.unit]
            tol = "–" if mm.tolerance is None else (f"±{mm.tolerance * 100:g} %" if mm.kind == "rel"
                                                     else f"±{mm.tolerance:g}")
            within = "–" if r.within is None else ("yes" if r.within else '<span class="flag">no</span>')
            mrows.append([f"{_esc(name)}{' (judged)' if mm.judged else ''}", _esc(unit),
                          cell(r, "sim"), cell(r, "linux"), "–" if r.ratio is None else f"{r.ratio:.3f}",
                          "–" if r.diff is None else _esc(_fmt_val(mm, r.diff) if mm.unit else f"{r.diff:+.3f}"),
                          tol, within, "–" if r.exceeds_spread is None else ("yes" if r.exceeds_spread else "no")])
        badge = "" if s.verdict == "agree" else f'<span class="badge">{_esc(s.verdict)}</span>'
        ids = ", ".join(f"{b}: " + " ".join(f"<code>{_esc(x)}</code>" for x in s.runs[b]["run_ids"])
                        for b in ("sim", "linux"))
        parts.append(
            f'<details class="run" id="sc-{_esc(s.config_id)}" data-run="{_esc(s.config_id)}"><summary>'
            f"{_esc(s.label)} <span class=\"muted\">config {_esc(s.config_id)}</span>{badge}</summary>"
            f"<p class=\"muted\">runs {ids}</p>"
            + _table(["metric", "unit", "sim median", "linux median", "sim/linux", "sim − linux", "tolerance",
                      "within", "exceeds spread"], mrows, left=1)
            + f'<div class="plot" id="{fid}"></div></details>')

    # method
    parts.append('<h2 id="method">Method</h2><ul>' + "".join(
        f"<li><b>{_esc(m_.name)}</b>{' (judged)' if m_.judged else ''}: {_esc(m_.doc)}; tolerance "
        f"{'none (reported)' if m_.tolerance is None else (f'±{m_.tolerance * 100:g} % of linux' if m_.kind == 'rel' else f'±{m_.tolerance:g} absolute')}</li>"
        for m_ in METRICS) + "</ul><p>A scenario agrees when every judged metric is within tolerance. The "
        "difference <i>exceeds the spread</i> when |median sim − median linux| is larger than both backends' "
        "min–max ranges over repetitions together and than 1 % (ccbench compare's rule). Suspect linux runs are "
        "left out of every number.</p>")
    parts.append(f"<details><summary>the grid as a study file</summary><pre>{_esc(_study_text_of(v))}</pre>"
                 "</details>")

    doc = {"title": title, "eager": ["ratio-figure"], "lazy": lazy, "figures": figures, "flags": []}
    payload = json.dumps(_nan_free(doc), separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_esc(title)}</title><style>{CSS}</style>"
            f"<script>{_plotly_js()}</script></head><body>" + "".join(parts)
            + f'<script type="application/json" id="ccbench-data">{payload}</script>'
            + f"<script>{JS}</script></body></html>\n")


def _study_text_of(v: Validation) -> str:
    return study_text(v.grid, f"{v.duration_us / 1e6:g}s", v.reps)


def write_outputs(v: Validation) -> dict[str, Path]:
    out = Path(v.out)
    paths = {"csv": out / "validation.csv", "json": out / "validation.json", "html": out / "validation.html"}
    for kind, text in (("csv", csv_text(v)), ("json", json_text(v)), ("html", html_page(v))):
        tmp = paths[kind].with_name(paths[kind].name + ".part")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(paths[kind])
    return paths


# -- command line -------------------------------------------------------------------------


def add_command(sub: Any) -> None:
    """Register `ccbench validate` on the CLI's subparsers."""
    v = sub.add_parser("validate", help="run a grid of scenarios on sim and linux and say how far apart they are")
    v.add_argument("--grid", choices=tuple(GRIDS), default=None,
                   help="; ".join(f"{g.name}: {g.size} scenarios, {g.reps} × {g.duration}" for g in GRIDS.values())
                   + " (default medium)")
    v.add_argument("--quick", action="store_true", help="the same as --grid quick (what `make test` runs)")
    v.add_argument("--reps", type=int, metavar="N", help="repetitions per scenario and backend (default: the grid's)")
    v.add_argument("--duration", metavar="TIME", help="length of each run, e.g. '15s' (default: the grid's)")
    v.add_argument("--out", metavar="DIR", help=f"results directory (default {DEFAULT_OUT}/)")
    v.add_argument("--jobs", "-j", type=int, default=1, metavar="N",
                   help="sim runs at the same time (default 1; 0 = one per CPU); linux runs are always serial")
    v.add_argument("--retry-suspect", type=int, default=1, metavar="N",
                   help="run a linux run that came back suspect again, up to N times (default 1)")
    v.add_argument("--rerun-sim", action="store_true",
                   help="run the sim half again even where it is finished (after a change to the simulator); "
                        "the linux runs are kept")
    v.add_argument("--no-run", action="store_true", help="only compare what the results directory holds")
    v.add_argument("--format", choices=("table", "csv", "json", "markdown"), default="table",
                   help="what to print (markdown: the table of docs/validation/README.md)")
    v.set_defaults(func=cmd_validate)


def _unfinished(out: Path, run_ids: Sequence[str]) -> list[str]:
    from ccbench.store import DB_FILENAME, Store

    if not (out / DB_FILENAME).is_file():
        return list(run_ids)
    try:
        with Store.open_existing(out) as store:
            done = store.finished_runs()
    except Exception:  # e.g. locked by a running validation: the executor will say so
        return list(run_ids)
    return [r for r in run_ids if r not in done]


def _previous_log(out: Path) -> Optional[RunLog]:
    """The record of the invocation that last ran (--no-run keeps it in validation.json)."""
    try:
        old = json.loads((out / "validation.json").read_text())["invocation"]
        return RunLog(**{k: v for k, v in old.items() if k in RunLog.__dataclass_fields__})
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _command(grid: str, args: Any, out: Path) -> str:
    """The command line that (re)produces this validation."""
    cmd = ["ccbench", "validate", "--grid", grid]
    if args.reps is not None:
        cmd += ["--reps", str(args.reps)]
    if args.duration:
        cmd += ["--duration", args.duration]
    if args.out:
        cmd += ["--out", str(out)]
    return shlex.join(cmd)


def cmd_validate(args: Any) -> int:
    from ccbench.cli import EXIT_INTERRUPTED, _jobs, _stderr, _stdout
    from ccbench.errors import UsageError

    if args.quick and args.grid not in (None, "quick"):
        raise UsageError(f"--quick is --grid quick; it cannot be combined with --grid {args.grid}")
    grid = "quick" if args.quick else (args.grid or "medium")
    if args.retry_suspect < 0:
        raise UsageError(f"--retry-suspect: got {args.retry_suspect}; allowed: a number >= 0")
    jobs = _jobs(args.jobs)
    p = plan(grid, args.duration, args.reps)
    out = Path(args.out) if args.out else DEFAULT_OUT
    show = args.format == "table"
    con = _stdout()
    info = con if show else _stderr()
    log = RunLog(command=_command(grid, args, out),
                 started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    if args.no_run:
        log = _previous_log(out) or log
    if args.rerun_sim and args.no_run:
        raise UsageError("--rerun-sim runs the simulator; it cannot be combined with --no-run")
    if args.rerun_sim:
        n = len(_set_aside(out, [r.run_id for r in p.runs("sim")], "--rerun-sim", only_suspect=False))
        info.print(f"--rerun-sim: {n} finished sim runs will run again", soft_wrap=True)
    if not args.no_run:
        todo = len(_unfinished(out, [r.run_id for r in p.runs("linux")]))
        info.print(f"validate grid {p.grid.name}: {p.grid.size} scenarios × {p.reps} repetitions × {p.duration} on "
                   f"sim and linux → {out}; {todo} linux runs to do, about "
                   f"{todo * (p.duration_us / 1e6 + 1.6) / 60:.0f} min", soft_wrap=True)
        execute_plan(p, out, jobs=jobs, retry_suspect=args.retry_suspect, console=info, log=log)
    else:
        log.finished_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    from ccbench.store import find_db

    find_db(out)  # a clear message when --no-run finds nothing
    v = analyse(p, out, log)
    paths = write_outputs(v)
    if args.format == "csv":
        sys.stdout.write(csv_text(v))
    elif args.format == "json":
        sys.stdout.write(json_text(v))
    elif args.format == "markdown":
        sys.stdout.write(markdown_summary(v) + "\n" + markdown_table(v))
    else:
        con.print(table(v))
        con.print(summary_line(v), soft_wrap=True)
        con.print(f"written: {paths['csv']}, {paths['json']}, {paths['html']}", soft_wrap=True)
    if log.interrupted:
        _stderr().print(f"interrupted: what finished is saved in {out}; run the same command again to resume",
                        soft_wrap=True)
        return EXIT_INTERRUPTED
    return 0 if all(s.verdict == "agree" for s in v.scenarios) else 1
