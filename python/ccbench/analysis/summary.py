"""The summary table of ``ccbench run`` and ``ccbench summary``: a view of the
pipeline (study.analyze), one row per configuration and flow class.

Every number is a statistic of study.ConfigResult.stats, so the table, `show`,
the report and the API agree (tests/test_views.py checks it):

- goodput of a class: the median over repetitions of the class's mean
  per-flow goodput (``goodput_mean_bps[<class>]``), with its min–max;
- JFI: the median of Jain's index over all flows of a run (``jfi``);
- retransmissions, RTT, p99 RTT of a class: medians of ``retrans_pct``,
  ``rtt_mean_us``, ``rtt_p99_us`` of the class (metrics.py defines them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Mapping, Optional, Sequence

from ccbench.analysis.data import RunData
from ccbench.analysis.study import Analysis, analyze


@dataclass
class ClassSummary:
    group: str
    flows: int  # flows of this class in a run (the most seen in any repetition)
    goodput_bps: Optional[float]  # median over reps of the class's mean per-flow goodput
    goodput_min_bps: Optional[float]  # spread over reps
    goodput_max_bps: Optional[float]
    retrans_pct: Optional[float]
    rtt_mean_us: Optional[float]
    rtt_p99_us: Optional[float]


@dataclass
class ConfigSummary:
    study: str
    backend: Optional[str]
    config_id: str
    params: dict
    reps: int  # runs counted (ok + suspect)
    suspect: int  # degenerate runs included
    failed: int
    jfi: Optional[float]  # median over reps of JFI over all flows
    classes: list[ClassSummary] = field(default_factory=list)
    degenerate: int = 0  # suspect runs that measured nothing (ccbench.degenerate)
    identical: bool = False  # its repetitions gave the same results (ConfigResult.identical)


def summary_rows(a: Analysis) -> list[ConfigSummary]:
    """The summary table's rows, in the order of the analysis' configurations."""
    out = []
    for c in a.configs:
        def med(key: str) -> Optional[float]:
            s = c.stats.get(key)
            return s.median if s is not None else None

        classes = []
        for g in c.classes:
            gp = c.stats.get(f"goodput_mean_bps[{g}]")
            classes.append(ClassSummary(
                group=g, flows=max((rm.classes[g].flows for rm in c.runs if g in rm.classes), default=0),
                goodput_bps=gp.median if gp else None, goodput_min_bps=gp.min if gp else None,
                goodput_max_bps=gp.max if gp else None, retrans_pct=med(f"retrans_pct[{g}]"),
                rtt_mean_us=med(f"rtt_mean_us[{g}]"), rtt_p99_us=med(f"rtt_p99_us[{g}]")))
        out.append(ConfigSummary(c.study, c.backend, c.config_id, c.params, c.reps, c.suspect, c.failed,
                                 med("jfi"), classes, degenerate=c.degenerate, identical=c.identical))
    return out


def _get(row: Any, key: str, default: Any = None) -> Any:
    return row.get(key, default) if isinstance(row, Mapping) else getattr(row, key, default)


def summarize(runs: Sequence[Any], flows: Sequence[Any]) -> list[ConfigSummary]:
    """Summary rows from rows of the runs and flows tables (dicts or objects),
    without time series: ``runs`` need study, run_id, config_id, params,
    status (backend optional); ``flows`` need run_id, flow_id, group_name,
    goodput_bps, sent_segs, retrans_segs, rtt_mean_us, rtt_p99_us."""
    by_run: dict[str, list[dict]] = {}
    for f in flows:
        d = dict(f) if isinstance(f, Mapping) else dict(vars(f))
        by_run.setdefault(d["run_id"], []).append(d)
    data, failed = [], []
    for r in runs:
        ident = dict(study=_get(r, "study"), backend=_get(r, "backend"), config_id=_get(r, "config_id"),
                     params=_get(r, "params") or {})
        if _get(r, "status") == "failed":
            failed.append(SimpleNamespace(**ident))
            continue
        fs = by_run.get(_get(r, "run_id"), [])
        data.append(RunData(run_id=_get(r, "run_id"), flows=fs, bottleneck_bps=None, status=_get(r, "status"),
                            duration_us=max((f.get("stop_us") or 0 for f in fs), default=0), **ident))
    return summary_rows(analyze(data, failed_runs=failed))
