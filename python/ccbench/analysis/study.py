"""A whole results set analysed: per run metrics, per configuration statistics,
flagged runs.

A configuration is the runs of one study and backend sharing a config_id
(the same grouping as the summary table); failed runs are counted but not
analysed. A run is *flagged* when it has an anomaly (see anomalies.py), its
status is 'suspect', or it is an outlier among the repetitions of its
configuration (stats.outliers) in JFI, link utilisation or a class's mean
per-flow goodput.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from ccbench import console, degenerate
from ccbench.analysis.anomalies import KINDS
from ccbench.analysis.data import RunData, load_runs
from ccbench.analysis.metrics import RunMetrics, run_metrics, upper_bound
from ccbench.analysis.settings import AnalysisSettings, from_study_text
from ccbench.analysis.stats import Spread, outliers, spread

OUTLIER_METRICS = ("jfi", "utilisation")  # plus goodput_mean_bps[<class>] for every class


@dataclass
class Flag:
    run_id: str
    config_id: str
    kind: str  # collapse | starvation | not steady | outlier | suspect | degenerate
    reason: str
    flow_id: Optional[int] = None

    def as_dict(self) -> dict:
        return dict(self.__dict__)


# For people, beside a configuration whose ConfigResult.identical is true.
IDENTICAL_NOTE = ("identical: its repetitions gave the same results (nothing random in it changed them; "
                  "a flow's start_jitter, or a link's loss or jitter, would)")


@dataclass
class ConfigResult:
    study: str
    backend: Optional[str]
    config_id: str
    params: dict
    runs: list[RunMetrics]
    failed: int = 0
    stats: dict[str, Spread] = field(default_factory=dict)
    flags: list[Flag] = field(default_factory=list)

    @property
    def key(self) -> tuple:
        return (self.study, self.backend, self.config_id)

    @property
    def reps(self) -> int:
        return len(self.runs)

    @property
    def suspect(self) -> int:
        """Suspect runs, degenerate ones included."""
        return sum(1 for r in self.runs if r.run.status == "suspect")

    @property
    def degenerate(self) -> int:
        """Suspect runs that measured nothing (ccbench.degenerate)."""
        return sum(1 for r in self.runs if r.run.status == "suspect" and degenerate.is_degenerate_note(r.run.error))

    @property
    def identical(self) -> bool:
        """Two or more repetitions, every metric the same in each: nothing in
        the configuration drew randomness (the simulator is deterministic; a
        flow's start_jitter, a link's loss or jitter make repetitions
        differ), so their spread and interval say nothing about variation."""
        vals = [r.values() for r in self.runs]
        return len(vals) >= 2 and all(v == vals[0] for v in vals[1:])

    @property
    def classes(self) -> list[str]:
        return list(dict.fromkeys(g for r in self.runs for g in r.classes))

    @property
    def links(self) -> list[str]:
        """A general topology's queueing links (directed names), for the link_* metrics."""
        return list(dict.fromkeys(ln for r in self.runs for ln in r.links))

    def anomaly_counts(self) -> dict[str, int]:
        """kind → number of runs with at least one anomaly of that kind."""
        return {k: sum(1 for r in self.runs if any(a.kind == k for a in r.anomalies)) for k in KINDS}

    def anomaly_text(self) -> str:
        """e.g. "collapse in 3 of 25 runs; not steady in 1 of 25 runs" ('' if none)."""
        return "; ".join(f"{k} in {n} of {self.reps} runs" for k, n in self.anomaly_counts().items() if n)

    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.params.items()) or self.config_id


@dataclass
class Analysis:
    configs: list[ConfigResult]
    settings: dict[str, AnalysisSettings]  # per study
    studies: list[dict] = field(default_factory=list)  # rows of the studies table
    failed_runs: list[Any] = field(default_factory=list)  # RunRecords of failed runs
    source: str = ""  # where the results came from

    def runs(self) -> list[RunMetrics]:
        return [r for c in self.configs for r in c.runs]

    def flags(self) -> list[Flag]:
        return [f for c in self.configs for f in c.flags]

    def param_keys(self) -> list[str]:
        return list(dict.fromkeys(k for c in self.configs for k in c.params))


def config_result(study: str, backend: Optional[str], config_id: str, params: dict,
                  runs: Sequence[RunMetrics], failed: int = 0) -> ConfigResult:
    c = ConfigResult(study, backend, config_id, params, list(runs), failed)
    keys = list(dict.fromkeys(k for r in runs for k in r.values()))
    vals = [r.values() for r in runs]
    for k in keys:
        c.stats[k] = spread((v.get(k) for v in vals), upper_bound(k))
    for r in runs:
        if r.run.status == "suspect":
            kind = "degenerate" if degenerate.is_degenerate_note(r.run.error) else "suspect"
            c.flags.append(Flag(r.run_id, config_id, kind, r.run.error or "the backend marked the run suspect"))
        for a in r.anomalies:
            c.flags.append(Flag(r.run_id, config_id, a.kind, a.reason, a.flow_id))
    watched = list(OUTLIER_METRICS) + [k for k in keys if k.startswith("goodput_mean_bps[")]
    for k in watched:
        xs = [v.get(k) for v in vals]
        st = c.stats.get(k)
        for i in outliers(xs):
            name = k.replace("goodput_mean_bps", "goodput").replace("[", " of '").replace("]", "'")
            c.flags.append(Flag(runs[i].run_id, config_id, "outlier",
                                f"{name} {console.metric(k, xs[i])} is far from the other repetitions "
                                f"(median {console.metric(k, st.median)}, range {console.metric(k, st.min)}–"
                                f"{console.metric(k, st.max)}, n={st.n})"))
    return c


def analyze(runs: Sequence[RunData], settings: AnalysisSettings | dict[str, AnalysisSettings] = AnalysisSettings(),
            failed_runs: Sequence[Any] = (), studies: Sequence[dict] = (), source: str = "") -> Analysis:
    """Metrics of every run, statistics per configuration, flags."""
    per_study = settings if isinstance(settings, dict) else None
    groups: dict[tuple, list[RunMetrics]] = {}
    params: dict[tuple, dict] = {}
    for r in runs:
        s = (per_study.get(r.study) if per_study else settings) or AnalysisSettings()
        key = (r.study, r.backend, r.config_id)
        groups.setdefault(key, []).append(run_metrics(r, s))
        params.setdefault(key, r.params)
    failed: dict[tuple, int] = {}
    for f in failed_runs:
        key = (f.study, f.backend, f.config_id)
        failed[key] = failed.get(key, 0) + 1
        params.setdefault(key, f.params)
    configs = [config_result(k[0], k[1], k[2], params[k], groups.get(k, []), failed.get(k, 0))
               for k in dict.fromkeys(list(groups) + list(failed))]
    st = per_study if per_study is not None else {r.study: settings for r in runs}
    return Analysis(configs, st, list(studies), list(failed_runs), source)


def analyze_store(results: str | Path, overrides: Optional[dict] = None, study: Optional[str] = None, *,
                  run_ids: Optional[Sequence[str]] = None, series: bool = True,
                  include_suspect: bool = True) -> Analysis:
    """Analyse every finished run of a results directory (a consistent
    snapshot of it: see Store.snapshot, so a study may be running into it).

    ``overrides`` are AnalysisSettings fields that win over each study's
    [analysis] table; ``run_ids`` limits the runs; ``series=False`` skips
    the time series (per-flow numbers only: quicker, but the steady-state,
    JFI-over-time and anomaly results are then empty); suspect runs count
    unless ``include_suspect`` is False.
    """
    from ccbench.store import Store

    with Store.snapshot(results) as store:
        return analyze_open_store(store, overrides, study, run_ids=run_ids, series=series,
                                  include_suspect=include_suspect)


def analyze_open_store(store: Any, overrides: Optional[dict] = None, study: Optional[str] = None, *,
                       run_ids: Optional[Sequence[str]] = None, series: bool = True,
                       include_suspect: bool = True) -> Analysis:
    """analyze_store on an open Store."""
    studies = store.studies()
    settings = {s["study"]: from_study_text(s["source_text"], s["path"] or s["study"])
                .with_overrides(**(overrides or {})) for s in studies}
    runs = load_runs(store, study=study, run_ids=run_ids, series=series)
    if not include_suspect:
        runs = [r for r in runs if r.status != "suspect"]
    failed = [r for r in store.runs(study=study, run_ids=run_ids) if r.status == "failed"]
    if study is not None:
        studies = [s for s in studies if s["study"] == study]
    return analyze(runs, settings, failed, studies, str(store.source_dir))
