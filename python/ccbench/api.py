"""The public Python API: a results directory as pandas DataFrames and the
analysis pipeline's views of it.

    import ccbench
    r = ccbench.open("results/loss-sweep")
    r.flows                       # the flows table, one row per flow of every run
    r.by_config()                 # per configuration and metric: median, mean, 95 % CI, min, max
    r.report("report.html"); r.plot(metric="goodput", x="loss", group="cca")

``open`` reads a snapshot of the results (ccbench.store.Store.snapshot):
everything a Results returns is from one consistent state of the store, also
while a study is still writing it; open again to see newer runs. The tables
are read when first used, straight from DuckDB through Arrow. The command
line's analysis commands are built on this class.
"""

from __future__ import annotations

import functools
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar

from ccbench.analysis.settings import AnalysisSettings, read_toml

if TYPE_CHECKING:  # pandas and matplotlib load only when used
    import pandas as pd
    from matplotlib.figure import Figure

    from ccbench.analysis.expect import Outcome
    from ccbench.analysis.study import Analysis


_F = TypeVar("_F", bound=Callable[..., Any])


def _database_errors_explained(method: _F) -> _F:
    """DuckDB's errors on the results database (damaged past its header, a
    full disk) raised as ccbench's one-line DatabaseError, as the CLI says
    them, wherever a query meets them."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from ccbench.store_errors import DATABASE_ERRORS, explain

        try:
            return method(*args, **kwargs)
        except DATABASE_ERRORS as e:
            raise explain(e) from None

    return wrapper  # type: ignore[return-value]


class Results:
    """One results directory, read from a snapshot taken when it was opened.

    Use as a context manager or call :meth:`close` (the snapshot's copy is
    removed then; it is also removed when the object is garbage collected).
    """

    @_database_errors_explained
    def __init__(self, path: str | Path, **settings: Any):
        """``settings``: AnalysisSettings fields (e.g. ``steady_after_us``) that
        override each study's ``[analysis]`` table."""
        from ccbench.store import Store

        unknown = set(settings) - set(AnalysisSettings.__dataclass_fields__)
        if unknown:
            raise TypeError(f"unknown analysis setting {sorted(unknown)[0]!r} "
                            f"(allowed: {', '.join(AnalysisSettings.__dataclass_fields__)})")
        self.path = Path(path)
        self._settings = {k: v for k, v in settings.items() if v is not None}
        self._store = Store.snapshot(path)
        self._close = weakref.finalize(self, self._store.close)
        self._frames: dict[str, Any] = {}
        self._analysis: Optional[Analysis] = None

    # -- lifecycle ----------------------------------------------------------------

    def close(self) -> None:
        self._close()

    def __enter__(self) -> "Results":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Results({str(self.path)!r})"

    # -- the tables -----------------------------------------------------------------

    @_database_errors_explained
    def table(self, name: str) -> "pd.DataFrame":
        """A table of the store as a DataFrame, in the store's stable order
        (runs: study, run index; the others: run_id, flow or link, time).
        JSON columns (runs.params, config, stats) stay JSON text."""
        from ccbench.store import ALL_TABLES

        if name not in ALL_TABLES:
            raise ValueError(f"no table {name!r} (tables: {', '.join(ALL_TABLES)})")
        if name not in self._frames:
            self._frames[name] = self._store.reader(name).read_pandas()
        return self._frames[name]

    @property
    def studies(self) -> "pd.DataFrame":
        """The studies table: study, path, source_text, first_run_at, last_run_at."""
        return self.table("studies")

    @property
    def runs(self) -> "pd.DataFrame":
        """The runs table: one row per run (failed ones too) with its swept params (JSON), status ..."""
        return self.table("runs")

    @property
    def flows(self) -> "pd.DataFrame":
        """The flows table: per flow of every run, goodput_bps, retrans_segs, rtt_*_us ..."""
        return self.table("flows")

    @property
    def samples(self) -> "pd.DataFrame":
        """The samples table: per flow time series (time_us, cwnd_bytes, srtt_us, delivered_bytes ...)."""
        return self.table("samples")

    @property
    def queue(self) -> "pd.DataFrame":
        """The queue table: per link time series (backlog_bytes, drops, ecn_marks ...)."""
        return self.table("queue")

    @property
    def rpcs(self) -> "pd.DataFrame":
        """The rpcs table: per request, flow_id, start_us, latency_us."""
        return self.table("rpcs")

    @property
    def events(self) -> "pd.DataFrame":
        """The events table (route changes, controller actions) where the store has one."""
        from ccbench.store import ALL_TABLES

        if "events" not in ALL_TABLES:
            import pandas as pd

            return pd.DataFrame()
        return self.table("events")

    # -- the pipeline -------------------------------------------------------------------

    @_database_errors_explained
    def analysis(self) -> "Analysis":
        """The analysis pipeline's result (ccbench.analysis.study.Analysis):
        per run metrics, per configuration statistics, flagged runs."""
        if self._analysis is None:
            from ccbench.analysis.study import analyze_open_store

            self._analysis = analyze_open_store(self._store, self._settings)
            self._analysis.source = str(self.path)
        return self._analysis

    @_database_errors_explained
    def metrics(self) -> "pd.DataFrame":
        """Per run metrics, one row per run and metric key (long format):
        study, backend, config_id, run_id, repetition, status, one column per
        swept parameter, then metric (a name of analysis.metrics.METRICS),
        group (the class of flows, 'all flows', or None for run metrics), key
        (as in ``ccbench show``) and value."""
        import pandas as pd

        a = self.analysis()
        params = a.param_keys()
        rows = []
        for c in a.configs:
            for rm in c.runs:
                base = {"study": c.study, "backend": c.backend, "config_id": c.config_id, "run_id": rm.run_id,
                        "repetition": rm.run.repetition, "status": rm.run.status,
                        **{k: c.params.get(k) for k in params}}
                for key, v in rm.values().items():
                    rows.append({**base, **_split_key(key), "value": v})
        return pd.DataFrame(rows, columns=["study", "backend", "config_id", "run_id", "repetition", "status",
                                           *params, "metric", "group", "key", "value"])

    @_database_errors_explained
    def by_config(self) -> "pd.DataFrame":
        """Statistics over repetitions, one row per configuration and metric key:
        study, backend, config_id, the swept parameters, metric, group, key, n,
        median, mean, ci_low, ci_high (95 % Student-t CI of the mean; None with
        one repetition), min, max, and the configuration's reps, failed runs and anomalies."""
        import pandas as pd

        a = self.analysis()
        params = a.param_keys()
        rows = []
        for c in a.configs:
            base = {"study": c.study, "backend": c.backend, "config_id": c.config_id,
                    **{k: c.params.get(k) for k in params}}
            for key, s in c.stats.items():
                rows.append({**base, **_split_key(key), **{k: getattr(s, k) for k in
                             ("n", "median", "mean", "ci_low", "ci_high", "min", "max")},
                             "reps": c.reps, "failed": c.failed, "anomalies": c.anomaly_text()})
        return pd.DataFrame(rows, columns=["study", "backend", "config_id", *params, "metric", "group", "key", "n",
                                           "median", "mean", "ci_low", "ci_high", "min", "max", "reps", "failed",
                                           "anomalies"])

    @_database_errors_explained
    def flagged(self) -> "pd.DataFrame":
        """Flagged runs: run_id, config_id, kind (collapse, starvation, not steady, outlier, suspect), reason, flow_id."""
        import pandas as pd

        return pd.DataFrame([f.as_dict() for f in self.analysis().flags()],
                            columns=["run_id", "config_id", "kind", "reason", "flow_id"])

    @_database_errors_explained
    def check(self) -> list["Outcome"]:
        """Every study's expectations ([[expect]] in its study file) evaluated
        on these results, judged against the study's own configurations (its
        stored text), so a study still running reads as such. An expectation
        that names or matches nothing is a row with its ``error`` (failed)."""
        from ccbench.analysis.expect import evaluate_all, stored_plan
        from ccbench.spec.expect import parse

        out = []
        a = self.analysis()
        for s in self._store.studies():
            if not s["source_text"]:
                continue
            name = s["path"] or s["study"]
            expects = parse(read_toml(s["source_text"]), name)
            if expects:
                stored = self._store.runs(study=s["study"])
                plan = stored_plan(s["source_text"], name, {r.run_id: r.run_index for r in stored},
                                   stored[0].backend if stored else None, s["path"],
                                   self._store.study_profile(s["study"]))
                out += evaluate_all(expects, a, s["study"], name, plan)
        return out

    # -- outputs --------------------------------------------------------------------------

    @_database_errors_explained
    def report(self, out: str | Path, title: Optional[str] = None) -> Path:
        """Write the self-contained HTML report to ``out`` (whole, or nothing:
        ccbench.errors.UsageError naming the file and the cause)."""
        from ccbench.report.html import write_report

        return write_report(self.analysis(), out, title)

    @_database_errors_explained
    def plot(self, metric: str = "goodput", x: Optional[str] = None, group: str = "class",
             out: Optional[str | Path] = None, format: Optional[str] = None) -> "Figure":
        """A sweep figure (matplotlib): ``metric`` (a name of METRICS) against the
        swept parameter ``x`` (full path or a unique suffix such as 'loss'),
        one line per ``group`` (class, cca or kind of the flows, or a swept
        parameter: 'flows.1.cca' by its full name; docs/analysis.md). Saved to ``out`` if given, as ``format`` or else as its
        suffix says (png without one); a suffix of another format, a missing
        directory or a failed write is a ccbench.errors.UsageError, and
        leaves nothing behind."""
        from ccbench.analysis.sweeps import sweep_plot
        from ccbench.errors import UsageError
        from ccbench.report.figures import save_figure, sweep_figure
        from ccbench.report.page import check_target, write_whole

        if x is None:
            raise UsageError("plot: say which swept parameter goes on the x axis (x=...)")
        if out is not None:  # checked before the figure is made
            out = check_target(out)
            fmt = _figure_format(out, format)
        p = sweep_plot(self.analysis(), metric, x, group)
        if not any(pt.spread.n for s in p.series for pt in s.points):
            raise UsageError(f"--metric {metric}: no values in {self.path} ({_why_no_values(metric)})")
        fig = sweep_figure(p)
        if out is not None:
            write_whole(out, lambda tmp: save_figure(fig, tmp, fmt))
        return fig


def _why_no_values(metric: str) -> str:
    from ccbench.analysis.metrics import METRICS

    if METRICS[metric].level == "link":
        return (f"per-link metrics are a general topology's; the dumbbell's bottleneck has "
                f"'{metric.removeprefix('link_')}'")
    if metric.startswith("rpc"):
        return "no RPC flows"
    return "no run measured it"


def _figure_format(out: Path, format: Optional[str]) -> str:
    """The format a figure is saved in: ``format``, else ``out``'s suffix, else
    png. A suffix naming another format than ``format`` is refused (a .svg
    file of PNG bytes opens nowhere)."""
    from ccbench.errors import UsageError
    from ccbench.report.figures import FORMATS

    suffix = out.suffix.lstrip(".").lower()
    if format is not None and format not in FORMATS:
        raise UsageError(f"format {format!r}: allowed: {', '.join(FORMATS)}")
    if format is None:
        if suffix and suffix not in FORMATS:
            raise UsageError(f"{out}: cannot tell a figure format from '.{suffix}' "
                             f"(allowed: {', '.join('.' + f for f in FORMATS)}; or give the format)")
        return suffix or "png"
    if suffix in FORMATS and suffix != format:
        raise UsageError(f"{out}: a .{suffix} file, but the format asked for is {format}; "
                         f"give a file name ending in .{format}, or leave the format out")
    return format


def open_results(path: str | Path, **settings: Any) -> Results:
    """Open a results directory (or its ccbench.duckdb): see :class:`Results`."""
    return Results(path, **settings)


def _split_key(key: str) -> dict[str, Any]:
    """'goodput_mean_bps[cubic]' → metric 'goodput', group 'cubic'; 'jfi' → metric 'jfi', group None;
    'link_drops[l1]' → metric 'link_drops', group 'l1' (the link)."""
    from ccbench.analysis.metrics import METRICS

    attr, _, rest = key.partition("[")
    group = rest[:-1] if rest else None
    name = next((m.name for m in METRICS.values() if m.attr == attr and (m.level == "run") == (not rest)), attr)
    return {"metric": name, "group": group, "key": key}
