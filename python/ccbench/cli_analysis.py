"""The analysis commands of the command line (registered by ccbench.cli):

    ccbench report RESULTS [--out report.html] [analysis options]
    ccbench plot RESULTS --metric goodput --x loss [--group class] [--format png|svg|pdf] [--out FILE]
    ccbench compare A B [--match auto|config_id|params] [--tolerance 0.01] [--format table|csv|json]
    ccbench show RESULTS [--format table|csv|json]      (a results directory instead of a run id)
    ccbench check RESULTS [--format table|json]         (the studies' [[expect]] on their results)
    ccbench validate [--grid quick|medium|full] ...     (ccbench.validate: sim against linux)

Each is a view of the analysis pipeline through the public API
(ccbench.api.Results); results are read from a snapshot, so they work while
a study is still writing them.

Analysis options (override the study's [analysis] table; see
ccbench/analysis/settings.py): --steady-after TIME, --collapse-fraction F,
--collapse-min TIME, --converge-jfi J.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path
from typing import Any, Optional

from rich.markup import escape
from rich.table import Table

from ccbench import console
from ccbench.errors import EXIT_EXPECTATION, EXIT_FAILED_RUNS, EXIT_OK, UsageError


def _time_us(value: str, flag: str) -> int:
    from ccbench.spec import units

    try:
        return units.parse_time(value) // 1000
    except units.UnitError as e:
        raise UsageError(f"{flag}: {e.problem} (got {value!r}; allowed: {e.allowed})") from None


def _fraction(value: str, flag: str) -> float:
    try:
        x = float(value)
    except ValueError:
        x = -1.0
    if not 0 < x <= 1:
        raise UsageError(f"{flag}: got {value!r}; allowed: a number > 0 and <= 1")
    return x


def add_analysis_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("analysis options (override the study's [analysis] table)")
    g.add_argument("--steady-after", metavar="TIME", help="start of the steady-state window, e.g. '10s'")
    g.add_argument("--collapse-fraction", metavar="F", help="collapse below this fraction of the fair share (0.1)")
    g.add_argument("--collapse-min", metavar="TIME", help="... for at least this long (2s)")
    g.add_argument("--converge-jfi", metavar="J", help="JFI that counts as converged to fairness (0.9)")


def overrides(args: argparse.Namespace) -> dict:
    out: dict[str, Any] = {}
    if getattr(args, "steady_after", None):
        out["steady_after_us"] = _time_us(args.steady_after, "--steady-after")
    if getattr(args, "collapse_fraction", None):
        out["collapse_fraction"] = _fraction(args.collapse_fraction, "--collapse-fraction")
    if getattr(args, "collapse_min", None):
        out["collapse_min_us"] = _time_us(args.collapse_min, "--collapse-min")
    if getattr(args, "converge_jfi", None):
        out["converge_jfi"] = _fraction(args.converge_jfi, "--converge-jfi")
    return out


def _results(path: str, args: argparse.Namespace):
    from ccbench.api import open_results

    return open_results(path, **overrides(args))


def _analysis(results: str, args: argparse.Namespace):
    with _results(results, args) as r:
        return r.analysis()


def _console():
    return console.stdout()


# -- report ------------------------------------------------------------------------


def cmd_report(args: argparse.Namespace) -> int:
    from ccbench.store import find_db

    db = find_db(args.results)
    out = Path(args.out) if args.out else db.parent / "report.html"
    with _results(args.results, args) as r:
        a = r.analysis()
        if not a.configs:
            raise UsageError(f"{args.results}: no finished runs to report on")
        r.report(out, args.title)
    flagged = len({f.run_id for f in a.flags()})
    _console().print(f"report: {out} ({len(a.runs())} runs, {len(a.configs)} configurations, "
                     f"{flagged} flagged)", soft_wrap=True)
    return 0


# -- plot ---------------------------------------------------------------------------


def cmd_plot(args: argparse.Namespace) -> int:
    from ccbench.analysis.metrics import METRICS
    from ccbench.store import find_db

    if args.metric not in METRICS:
        raise UsageError(f"argument --metric: {args.metric!r} is not a metric; one of {', '.join(METRICS)}")

    db = find_db(args.results)
    created = None  # the default figures directory, made here: removed again if no figure goes in
    with _results(args.results, args) as r:
        out = Path(args.out) if args.out else None
        if out is None:
            from ccbench.analysis.sweeps import resolve_param

            keys = r.analysis().param_keys()
            x_key = resolve_param(args.x, keys, "--x") or args.x
            out = db.parent / "figures" / f"{args.metric}-vs-{x_key.split('.')[-1]}.{args.format or 'png'}"
            if not out.parent.is_dir():  # the default directory is made here; one given with --out must exist
                try:
                    out.parent.mkdir()
                except OSError as e:
                    raise UsageError(f"{out.parent}: cannot create directory ({e.strerror})") from None
                created = out.parent
        try:
            r.plot(args.metric, args.x, args.group, out=out, format=args.format)
        except BaseException:
            if created is not None:
                created.rmdir()
            raise
    _console().print(str(out), soft_wrap=True)
    return EXIT_OK


# -- compare -------------------------------------------------------------------------


def _val(key: str, v: Optional[float], sign: bool = False) -> str:
    unit = console.unit_of(key)
    text = console.value(v, unit, short=unit not in ("bps", "us"))
    return ("+" + text) if sign and v is not None and v > 0 else text


def _studies(a: Any) -> str:
    return ", ".join(dict.fromkeys(c.study for c in a.configs))


def cmd_compare(args: argparse.Namespace) -> int:
    from ccbench.analysis.compare import check_tolerance, compare

    check_tolerance(args.tolerance)  # before the analyses, which take a while
    a = _analysis(args.a, args)
    b = _analysis(args.b, args)
    cmp = compare(a, b, args.match, args.tolerance)
    if not cmp.pairs:  # nothing was compared: not "no differences"
        raise UsageError(f"{args.a} ({len(cmp.only_a)} configurations) and {args.b} ({len(cmp.only_b)}) have "
                         f"none in common (matched by {cmp.matched_by}): nothing to compare")
    if args.format == "json":
        json.dump(cmp.as_dict(), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
        return 0
    if args.format == "csv":
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(["config", "a_config_id", "b_config_id", "metric", "a_median", "b_median", "diff", "rel_diff",
                    "a_spread", "b_spread", "a_n", "b_n", "exceeds_spread", "few_reps", "a_study", "b_study",
                    "a_failed", "b_failed"])
        for p in cmp.pairs:
            for r in p.rows:
                w.writerow([p.label, p.a.config_id, p.b.config_id, r.metric, r.a_median, r.b_median, r.diff,
                            *["" if x is None else x for x in (r.rel_diff, r.a_spread, r.b_spread)], r.a_n, r.b_n,
                            int(r.exceeds), int(r.few_reps), p.a.study, p.b.study, p.a.failed, p.b.failed])
            if not p.rows:  # a side with no finished run: nothing to compare, but the pair is there
                w.writerow([p.label, p.a.config_id, p.b.config_id, "", "", "", "", "", "", "", p.a.reps, p.b.reps,
                            0, 0, p.a.study, p.b.study, p.a.failed, p.b.failed])
        return 0
    c = _console()
    c.print(f"A = {escape(args.a)} ({escape(_studies(a))}), B = {escape(args.b)} ({escape(_studies(b))}); "
            f"configurations matched by {cmp.matched_by}", soft_wrap=True)
    tol = f"{100 * args.tolerance:g} %"
    for p in cmp.pairs:
        unjudged = sum(1 for r in p.rows if r.few_reps and r.differs)
        empty = [f"{side} has no finished run ({c.failed} failed)" for side, c in (("A", p.a), ("B", p.b))
                 if not c.reps]
        failed = [f"{side}: {c.failed} of {c.reps + c.failed} runs failed" for side, c in (("A", p.a), ("B", p.b))
                  if c.failed and c.reps]
        what = ("nothing to compare: " + ", ".join(empty) if empty else
                f"{len(p.flagged)} of {len(p.rows)} differences exceed the spread"
                if not all(r.few_reps for r in p.rows) else
                f"1 repetition a side, spread unknown: {unjudged} of {len(p.rows)} differ by more than {tol}")
        what += "".join(f"; {x}" for x in failed)
        t = Table(title=escape(f"{p.label}  ({what})"), title_justify="left")
        for col in ("metric", "A median", "B median", "B − A", "%", "spread A", "spread B", "n A/B", ""):
            t.add_column(col, justify="left" if col in ("metric", "") else "right")
        for r in p.rows:
            t.add_row(escape(r.metric), _val(r.metric, r.a_median), _val(r.metric, r.b_median),
                      _val(r.metric, r.diff, sign=True), "–" if r.rel_diff is None else f"{100 * r.rel_diff:+.1f}",
                      _val(r.metric, r.a_spread), _val(r.metric, r.b_spread), f"{r.a_n}/{r.b_n}",
                      "[red]exceeds spread[/]" if r.exceeds else
                      "[yellow]differs; spread unknown (1 rep each)[/]" if r.few_reps and r.differs else "")
        c.print(t)
    for name, only in (("A", cmp.only_a), ("B", cmp.only_b)):
        if only:
            c.print(f"only in {name}: " + escape(", ".join(cmp.name(x) for x in only)), soft_wrap=True)
    n = sum(len(p.flagged) for p in cmp.pairs)
    judged = [p for p in cmp.pairs if p.rows and not all(r.few_reps for r in p.rows)]
    unjudged = [r for p in cmp.pairs for r in p.rows if r.few_reps and r.differs]
    empty = sum(1 for p in cmp.pairs if not p.rows)
    few = len(cmp.pairs) - len(judged) - empty
    c.print(f"{n} differences exceed the spread across repetitions in {sum(1 for p in judged if p.flagged)} "
            f"of {len(judged)} judged configurations"
            + (f" ({few} more with 1 repetition on each side: the spread is unknown"
               + (f"; {len(unjudged)} differences of more than {tol} there, not judged)" if unjudged else ")")
               if few else "")
            + (f"; {empty} with no finished run on a side" if empty else ""), soft_wrap=True)
    return 0


# -- show RESULTS ---------------------------------------------------------------------


def show_results(args: argparse.Namespace) -> int:
    from ccbench.analysis import IDENTICAL_NOTE

    a = _analysis(args.run, args)
    if args.format == "json":
        out = {"configs": [{
            "study": c.study, "backend": c.backend, "config_id": c.config_id, "params": c.params,
            "reps": c.reps, "failed": c.failed, "identical": c.identical, "anomalies": c.anomaly_counts(),
            "stats": {k: s.as_dict() for k, s in c.stats.items()},
        } for c in a.configs], "flags": [f.as_dict() for f in a.flags()]}
        json.dump(out, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
        return 0
    if args.format == "csv":
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(["study", "backend", "config_id", "params", "metric", "n", "median", "mean", "ci_low", "ci_high",
                    "min", "max"])
        for c in a.configs:
            for k, s in c.stats.items():
                w.writerow([c.study, c.backend, c.config_id, json.dumps(c.params), k, s.n,
                            *["" if v is None else v for v in (s.median, s.mean, s.ci_low, s.ci_high, s.min, s.max)]])
        return 0
    con = _console()
    for c in a.configs:
        t = Table(title=escape(f"{c.study} {c.label()} (config {c.config_id}, {c.reps} reps"
                               + (f", {c.failed} failed" if c.failed else "")
                               + (", identical" if c.identical else "") + ")"), title_justify="left",
                  caption=escape("; ".join(x for x in (c.anomaly_text(), IDENTICAL_NOTE if c.identical else "") if x))
                  or None, caption_justify="left")
        for col in ("metric", "n", "median", "mean", "95% CI", "min", "max"):
            t.add_column(col, justify="left" if col == "metric" else "right")
        for k, s in c.stats.items():
            if not s.n:
                continue
            t.add_row(escape(k), str(s.n), _val(k, s.median), _val(k, s.mean),
                      console.NONE if s.ci_low is None else f"{_val(k, s.ci_low)}–{_val(k, s.ci_high)}",
                      _val(k, s.min), _val(k, s.max))
        con.print(t)
    flags = a.flags()
    if flags:
        t = Table(title="flagged runs", title_justify="left")
        for col in ("run", "flag", "reason"):
            t.add_column(col)
        for f in flags:
            t.add_row(f.run_id, escape(f.kind), escape(f.reason))
        con.print(t)
    return 0


# -- expectations: run and check -------------------------------------------------------------


def study_expectations(study: Any) -> tuple[list, Any]:
    """A loaded study's [[expect]] and its plan (analysis.expect.Plan), checked
    against the study's own configurations before anything runs (StudyError
    naming the file and the field otherwise)."""
    from ccbench.spec.expect import parse

    filename = str(study.path)
    expects = parse(study.document, filename)
    if not expects:  # nothing to check: the analysis stack stays unloaded until the runs are done
        return expects, None
    from ccbench.analysis.expect import check_plan, declared_sweep, study_plan

    full = declared_sweep(study.source_text) if study.profile is not None else study.sweep
    plan = study_plan(study, full)
    check_plan(expects, plan, filename)
    return expects, plan


def _status(o: Any) -> str:
    """The last column of a row: pass, FAIL (and why), ERROR, skipped; failed runs in yellow."""
    note = f": {escape(o.note)}" if o.note else ""
    if o.skipped is not None:
        return f"[yellow]skipped[/]: {escape(o.skipped)}"
    if o.error is not None:
        return f"[red]ERROR[/]: {escape(o.error)}"
    if not o.passed:
        return f"[red]FAIL[/]{note}"
    if o.failed_runs:
        return f"[yellow]pass, but {o.failed_runs} run{'s' if o.failed_runs != 1 else ''} failed[/]{note}"
    if o.pending_runs:
        return f"[yellow]pass so far: {o.pending_runs} run{'s' if o.pending_runs != 1 else ''} to come[/]{note}"
    return f"[green]pass[/]{note}"


def expectation_table(outcomes: list) -> Table:
    """Pass/fail per expectation and configuration: the measured value with its
    95 % CI, the threshold, and how far from it the value is. The configuration
    names its study when the outcomes come from several (study versions)."""
    several = len({o.study for o in outcomes}) > 1
    t = Table(title="expectations", title_justify="left")
    for col in ("#", "expectation", "configuration", "measured", "95% CI", "expected", "margin", "n", ""):
        t.add_column(col, justify="right" if col in ("#", "measured", "margin", "n") else "left")
    for o in outcomes:
        def v(x: Optional[float]) -> str:
            if x is not None and math.isinf(x):
                return "+∞" if x > 0 else "-∞"
            return console.value(x, "" if o.unit == "ratio" else o.unit)

        margin = console.NONE
        if o.margin is not None and math.isfinite(o.margin):
            margin = ("+" if o.margin >= 0 else "-") + v(abs(o.margin))
            if o.threshold:
                margin += f" ({100 * o.margin / abs(o.threshold):+.0f}%)"
        ci = console.NONE if o.ci_low is None or o.ci_high is None else f"{v(o.ci_low)}–{v(o.ci_high)}"
        label = f"{o.study}: {o.label}" if several else o.label
        n = str(o.n) + (f" ({o.failed_runs} failed)" if o.failed_runs else "") + (
            f" ({o.pending_runs} to come)" if o.pending_runs else "")
        t.add_row(str(o.index), escape(o.name), escape(label), v(o.value), ci,
                  f"{o.expect.stat} {o.expect.op} {v(o.threshold)}" if o.skipped is None else console.NONE,
                  margin, n, _status(o))
    return t


def print_expectations(expects: list, a: Any, study: str, filename: str, plan: Any = None) -> int:
    """Evaluate and print; the number of expectations that failed."""
    from ccbench.analysis.expect import evaluate_all

    outcomes = evaluate_all(expects, a, study, filename, plan)
    return _print_outcomes(outcomes)


def _print_outcomes(outcomes: list) -> int:
    """The table and a closing line counting expectations per study (a directory
    with two versions of a study counts each version's); the number that failed."""
    con = _console()
    con.print(expectation_table(outcomes))
    several = len({o.study for o in outcomes}) > 1
    rows: dict[tuple, list] = {}
    for o in outcomes:
        rows.setdefault((o.study, o.index), []).append(o)
    failed = [k for k, os in rows.items() if any(o.failed for o in os)]
    skipped = [k for k, os in rows.items() if all(o.skipped is not None for o in os)]
    with_failed_runs = [k for k, os in rows.items() if k not in failed and any(o.failed_runs for o in os)]
    partial = [k for k, os in rows.items() if k not in failed and any(o.pending_runs for o in os)]

    def names(keys: list) -> str:
        return ", ".join(f"#{i}" + (f" of {s}" if several else "") for s, i in keys)

    n = len(rows)
    note = f"; {len(skipped)} skipped (not in these results, or none of their runs finished yet)" if skipped else ""
    if with_failed_runs:
        note += f"; {names(with_failed_runs)} held on configurations some of whose runs failed"
    if partial:
        note += f"; {names(partial)} held so far on configurations whose runs are not all finished"
    if failed:
        con.print(f"[red]{len(failed)} of {n} expectations failed[/] ({escape(names(failed))}){escape(note)}",
                  soft_wrap=True)
    else:
        con.print(f"{n - len(skipped)} of {n} expectations hold{escape(note)}", soft_wrap=True)
    return len(failed)


def check_exit(outcomes: list) -> int:
    """3 when an expectation failed; else 1 when one was evaluated on a configuration
    some of whose runs failed (as `ccbench run` exits 1 for failed runs) or are
    still to come (a study running: nothing is settled yet); else 0."""
    if any(o.failed for o in outcomes):
        return EXIT_EXPECTATION
    return EXIT_FAILED_RUNS if any((o.failed_runs and o.skipped is None) or o.pending_runs
                                   for o in outcomes) else EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    with _results(args.results, args) as r:
        outcomes = r.check()
    if not outcomes:
        raise UsageError(f"{args.results}: its studies have no [[expect]] tables")
    if args.format == "json":
        # strict JSON: a ratio to 0 (+inf) is null with a note (Outcome.as_dict)
        json.dump([o.as_dict() for o in outcomes], sys.stdout, indent=2, default=str, allow_nan=False)
        sys.stdout.write("\n")
    else:
        _print_outcomes(outcomes)
    return check_exit(outcomes)


def add_commands(sub: Any) -> None:
    from ccbench.validate.command import add_command as add_validate

    rp = sub.add_parser("report", help="a self-contained HTML report of a results directory")
    rp.add_argument("results", metavar="RESULTS")
    rp.add_argument("--out", metavar="FILE", help="the HTML file (default: RESULTS/report.html)")
    rp.add_argument("--title", help="the report's title (default: from the study names)")
    add_analysis_options(rp)
    rp.set_defaults(func=cmd_report)

    pl = sub.add_parser("plot", help="a sweep figure for papers (PNG, SVG or PDF)")
    pl.add_argument("results", metavar="RESULTS")
    # checked in cmd_plot, not with choices=: the metric table needs numpy, which
    # `ccbench run` would otherwise import before its first run
    pl.add_argument("--metric", default="goodput", metavar="METRIC",
                    help="a metric of docs/analysis.md, e.g. goodput, retrans, rtt_p99 (default goodput)")
    pl.add_argument("--x", required=True, metavar="PARAM", help="the swept parameter on the x axis, e.g. loss")
    pl.add_argument("--group", default="class", metavar="G",
                    help="one line per: class, cca or kind of the flows (default class), or a swept parameter "
                         "(e.g. loss, or flows.1.cca by its full name)")
    pl.add_argument("--format", choices=("png", "svg", "pdf"),
                    help="default: as --out's suffix says, else png; a suffix of another format is refused")
    pl.add_argument("--out", metavar="FILE", help="default: RESULTS/figures/<metric>-vs-<x>.<format>")
    add_analysis_options(pl)
    pl.set_defaults(func=cmd_plot)

    cp = sub.add_parser("compare", help="two results sets side by side, per configuration")
    cp.add_argument("a", metavar="A", help="results directory A (e.g. sim, or before a change)")
    cp.add_argument("b", metavar="B", help="results directory B")
    cp.add_argument("--match", choices=("auto", "config_id", "params"), default="auto",
                    help="pair configurations by config_id or by swept parameters (auto: config_id if any match)")
    cp.add_argument("--tolerance", type=float, default=0.01,
                    help="relative differences at most this are never flagged (default 0.01)")
    cp.add_argument("--format", choices=("table", "csv", "json"), default="table")
    add_analysis_options(cp)
    cp.set_defaults(func=cmd_compare)

    ck = sub.add_parser("check", help="evaluate the studies' [[expect]] tables on their results (exit 3 if one fails)")
    ck.add_argument("results", metavar="RESULTS")
    ck.add_argument("--format", choices=("table", "json"), default="table")
    add_analysis_options(ck)
    ck.set_defaults(func=cmd_check)

    add_validate(sub)
