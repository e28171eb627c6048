"""Comparing the backends per scenario: a view of the analysis pipeline.

The validation store is analysed by ccbench.analysis (ok runs only: suspect
runs are left out), with the steady-state window starting after the warm-up
(max(20 % of the run, 2 s)); the sim and the linux configurations of a
scenario share its config_id. Per scenario and metric: the median over
repetitions on each backend, the min–max spread, the ratio sim/linux (or
the difference, for retransmissions and JFI), whether it is within
tolerance, and whether the difference *exceeds the spread* across
repetitions (ccbench.analysis.compare's rule: |Δ median| > range(sim) +
range(linux) and > 1 %). The metrics, each the pipeline metric ``source``
over all flows of a run (ccbench.analysis.metrics):

  goodput_steady     Σ goodput after the warm-up, from the cumulative
                     delivered-bytes samples                         ±5 %  (judged)
  rtt_mean_steady    mean of the sampled smoothed RTT (srtt_us of the samples
                     table) after the warm-up, averaged over flows   ±10 % (judged)
  goodput            Σ goodput over the whole active time (flows table)  ±5 %
  goodput_flow_min_steady / _max_steady: the slowest / fastest flow  ±5 %
  rtt_mean           sampled srtt over the whole active time         ±10 %
  rtt_mean_summary   the backends' own rtt_mean_us: raw RTT samples, one per
                     round trip, on both (docs/analysis.md "RTT statistics"); no
                     tolerance, as linux runs stored before that change hold
                     the mean of sampled srtt instead
  retrans_pct        100 · Σ retransmitted / Σ sent segments   ±0.5 percentage points
  jfi_steady         Jain's index of the flows' steady goodput    ±0.05 (absolute)

A scenario *agrees* when both judged metrics are within tolerance. With
``--recheck N`` the scenarios that disagree at the grid's repetitions run N
more times on each backend and are judged again on all their runs. Mean RTT
is judged on the srtt series of the samples table on both backends, which
every linux run ever stored has (tcpi_rtt, sampled every interval).
"""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ccbench import console
from ccbench.analysis.stats import Spread, spread
from ccbench.validate.grid import Grid, Plan
from ccbench.validate.running import RunLog

@dataclass(frozen=True)
class Metric:
    name: str
    unit: str  # bps | us | % | ''
    kind: str  # rel: judged on the ratio sim/linux; abs: on the difference
    tolerance: Optional[float]  # None: reported only
    judged: bool  # decides the scenario's verdict
    doc: str
    source: str  # the pipeline's metric (ccbench.analysis.metrics.METRICS) over the scenario's flows


METRICS: tuple[Metric, ...] = (
    Metric("goodput_steady", "bps", "rel", 0.05, True,
           "Σ goodput of the flows after the warm-up (cumulative delivered-bytes samples)", "goodput_steady_sum"),
    Metric("rtt_mean_steady", "us", "rel", 0.10, True,
           "mean of the sampled smoothed RTT (samples.srtt_us) after the warm-up, mean over flows", "srtt_steady"),
    Metric("goodput", "bps", "rel", 0.05, False, "Σ goodput over the whole active time (flows table)", "goodput_sum"),
    Metric("goodput_flow_min_steady", "bps", "rel", 0.05, False, "the slowest flow's goodput after the warm-up", "goodput_steady_min"),
    Metric("goodput_flow_max_steady", "bps", "rel", 0.05, False, "the fastest flow's goodput after the warm-up", "goodput_steady_max"),
    Metric("rtt_mean", "us", "rel", 0.10, False, "mean of the sampled srtt over the whole active time", "srtt"),
    Metric("rtt_mean_summary", "us", "rel", None, False,
           "the backend's rtt_mean_us: raw RTT samples, one per round trip (docs/analysis.md)", "rtt"),
    Metric("retrans_pct", "%", "abs", 0.5, False, "100 · Σ retransmitted / Σ sent segments (percentage points)", "retrans"),
    Metric("jfi_steady", "", "abs", 0.05, False, "Jain's index over the flows' goodput after the warm-up", "jfi_steady"),
    Metric("timeouts", "", "abs", None, False,
           "retransmission timeouts in the run, all flows (stats rto_count: the kernel's TCPTimeouts)", "timeouts"),
    Metric("recoveries", "", "abs", None, False,
           "entries into fast recovery in the run, all flows (stats recoveries: the kernel's TCPSackRecovery)", "recoveries"),
)
METRIC = {m.name: m for m in METRICS}
JUDGED = tuple(m.name for m in METRICS if m.judged)


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
    runs: dict[str, dict]  # backend -> {ok, suspect, failed, missing, run_ids, suspect_notes, per_run}
    series: dict[str, list]  # backend -> usable RunData (for the figures)
    rechecked: bool = False  # run more times than the grid's repetitions (--recheck)

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

    @property
    def beyond_spread(self) -> bool:
        """Disagrees on a judged metric by more than the runs spread on both
        backends: a difference the repetitions cannot explain. A scenario
        outside tolerance but within that spread may flip with other runs."""
        return self.verdict == "disagree" and any(
            self.rows[k].within is False and self.rows[k].exceeds_spread for k in JUDGED)

    def outside(self, judged_only: bool = False) -> list[str]:
        return [k for k, r in self.rows.items() if r.within is False and (r.metric.judged or not judged_only)]

    def as_dict(self) -> dict:
        runs = {b: {k: v for k, v in d.items()} for b, d in self.runs.items()}
        return {"scenario": self.label, "config_id": self.config_id, "params": self.params,
                "verdict": self.verdict, "beyond_spread": self.beyond_spread, "rechecked": self.rechecked,
                "outside_tolerance": self.outside(),
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
    sim_path: dict = field(default_factory=dict)  # Plan.sim_path
    sim_return: dict = field(default_factory=dict)  # Plan.sim_return
    recheck_reps: int = 0  # the rechecked scenarios' repetitions in all (0: no --recheck)

    def counts(self) -> dict[str, int]:
        out = {"agree": 0, "disagree": 0, "no data": 0}
        for s in self.scenarios:
            out[s.verdict] += 1
        return out

    def beyond_spread(self) -> int:
        """How many scenarios disagree by more than the runs' spread."""
        return sum(s.beyond_spread for s in self.scenarios)

    def disagreeing(self) -> list[str]:
        """The config ids of the scenarios that disagree (what --recheck runs again)."""
        return [s.config_id for s in self.scenarios if s.verdict == "disagree"]

    def rechecked(self) -> list["Scenario"]:
        return [s for s in self.scenarios if s.rechecked]

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
            "disagree_beyond_spread": self.beyond_spread(),
            "recheck": {"repetitions": self.recheck_reps, "scenarios": len(self.rechecked()),
                        "agree": sum(s.verdict == "agree" for s in self.rechecked())} if self.recheck_reps else None,
            "machine": self.machine,
            "sim_tcp": self.sim_tcp,
            "sim_path": self.sim_path,
            "sim_return": self.sim_return,
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


def _run_row(spec: Any, rec: Any, values: dict, keys: dict) -> dict:
    """One stored run of a scenario: its judged metrics (None where the run is
    left out) and, for a linux run, its emulator's lateness, which the
    kernel's numbers follow on short paths (docs/validation/README.md,
    sessions 23 and 25), and the steal time on the emulator's CPU, which
    the lateness follows (backends/steal.py)."""
    stats = rec.stats or {}
    emu = stats.get("emulator") or {}
    late = emu.get("lateness_us") or {}
    cpu = stats.get("emu_cpu")
    return {"run_id": rec.run_id, "repetition": spec.repetition, "status": rec.status,
            **{m: values.get(k) for m, k in keys.items()},
            "late_pkts": emu.get("late_pkts"), "lateness_p99_us": late.get("p99"), "lateness_max_us": late.get("max"),
            "emu_cpu_steal": (stats.get("steal") or {}).get(str(cpu)) if cpu is not None else None}


def analyse(p: Plan, out: Path, log: Optional[RunLog] = None) -> Validation:
    """Compare the two backends per scenario from the store in ``out``."""
    from ccbench.analysis.metrics import ALL_FLOWS, METRICS as PIPELINE
    from ccbench.analysis.study import analyze_open_store
    from ccbench.store import Store

    planned = {b: p.runs(b) for b in ("sim", "linux")}
    ids = [r.run_id for b in planned for r in planned[b]]
    with Store.snapshot(out) as store:
        records = {r.run_id: r for r in store.runs(run_ids=ids)}
        a = analyze_open_store(store, {"steady_after_us": p.warmup_us}, run_ids=ids, include_suspect=False)
    configs = {(c.backend, c.config_id): c for c in a.configs}
    order: list[str] = []
    params: dict[str, dict] = {}
    for r in planned["sim"]:
        if r.config_id not in params:
            order.append(r.config_id)
            params[r.config_id] = r.params
    scenarios = []
    for cid in order:
        runs: dict[str, dict] = {}
        stats: dict[str, dict[str, Spread]] = {}
        usable: dict[str, list] = {}
        for b in ("sim", "linux"):
            mine = [r for r in planned[b] if r.config_id == cid]
            info = {"planned": len(mine), "ok": 0, "suspect": 0, "failed": 0, "missing": 0, "run_ids": [],
                    "suspect_notes": {}}
            for r in mine:
                rec = records.get(r.run_id)
                if rec is None:
                    info["missing"] += 1
                    continue
                info[rec.status] = info.get(rec.status, 0) + 1
                info["run_ids"].append(r.run_id)
                if rec.status == "suspect":
                    info["suspect_notes"][r.run_id] = (rec.error or "").strip().splitlines()[0] if rec.error else ""
            runs[b] = info
            c = configs.get((b, cid))
            usable[b] = [rm.run for rm in c.runs] if c is not None else []
            pool = (c.classes[0] if len(c.classes) == 1 else ALL_FLOWS) if c is not None and c.classes else None
            stats[b] = {m.name: (c.stats.get(PIPELINE[m.source].key(pool)) if c is not None and pool else None)
                        or spread([]) for m in METRICS}
            values = {rm.run_id: rm.values() for rm in (c.runs if c is not None else [])}
            keys = {m: PIPELINE[METRIC[m].source].key(pool) for m in JUDGED}
            info["per_run"] = [_run_row(r, records[r.run_id], values.get(r.run_id, {}), keys)
                               for r in mine if r.run_id in records]
        rows = {m.name: compare_spreads(m, stats["sim"][m.name], stats["linux"][m.name]) for m in METRICS}
        scenarios.append(Scenario(cid, _scenario_params(params[cid]), rows, runs, usable, cid in p.recheck))
    return Validation(p.grid, p.duration_us, p.warmup_us, p.reps, scenarios, out, log, machine_info(), p.sim_tcp,
                      p.sim_path, p.sim_return, max(p.recheck.values(), default=0))


def fmt_val(m: Metric, v: Optional[float]) -> str:
    """A value in the tables' fixed units: Mbit/s, ms, % (2 decimals) or a number (3)."""
    div = {"bps": 1e6, "us": 1e3}.get(m.unit, 1.0)
    return console.number(None if v is None else v / div, "{:.3f}" if m.unit == "" else "{:.2f}")


def summary_line(v: Validation) -> str:
    c = v.counts()
    n = len(v.scenarios)
    text = (f"{c['agree']} of {n} scenarios agree (sim within ±5 % of linux on goodput and ±10 % on mean RTT, "
            f"after a {v.warmup_us / 1e6:g} s warm-up)")
    if c["disagree"]:
        text += f"; {c['disagree']} disagree, {v.beyond_spread()} of them by more than the runs' spread"
    again = v.rechecked()
    if again:
        k = sum(s.verdict == "agree" for s in again)
        text += (f"; {len(again)} that disagreed at {v.reps} runs a side were judged on {v.recheck_reps} "
                 f"(--recheck), {k} of them now agree{'s' if k == 1 else ''}")
        missing = sum(s.runs[b].get("missing", 0) for s in again for b in ("sim", "linux"))
        if missing:
            text += f" ({missing} of their runs not run yet)"
    if c["no data"]:
        text += f"; {c['no data']} without usable runs on a backend"
    sus = len(v.suspect_runs())
    if sus:
        text += f"; {sus} suspect linux runs left out"
    return text
