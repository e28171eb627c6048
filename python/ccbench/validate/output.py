"""A validation's outputs: the terminal table, CSV, JSON and the Markdown
tables of docs/validation/README.md (the HTML page is validate/page.py)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Optional

from ccbench.validate.comparison import JUDGED, MetricRow, Validation, fmt_val
from ccbench.validate.page import html_page

CSV_COLUMNS = ("scenario", "config_id", "cca", "flows", "rate", "rtt", "buffer", "loss", "verdict", "metric", "unit",
               "judged", "tolerance", "tolerance_kind", "sim_median", "sim_min", "sim_max", "sim_n",
               "linux_median", "linux_min", "linux_max", "linux_n", "ratio", "diff", "within", "exceeds_spread",
               "linux_suspect", "linux_failed", "rechecked")


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
                r.ratio, r.diff, r.within, r.exceeds_spread, s.runs["linux"]["suspect"], s.runs["linux"]["failed"],
                s.rechecked)])
    return buf.getvalue()


def json_text(v: Validation) -> str:
    from ccbench.report.page import nan_free

    return json.dumps(nan_free(v.as_dict()), indent=2, default=str) + "\n"


def table(v: Validation) -> Any:
    """A rich table, one row per scenario."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    title = f"ccbench validate, grid {v.grid.name}: sim vs linux, median over {v.reps} repetitions"
    if v.recheck_reps:
        title += f" ({v.recheck_reps} for the scenarios marked rechecked)"
    t = Table(title=escape(title),
              title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), show_edge=False,
              caption=escape(
                  f"goodput = Σ over flows and RTT = mean sampled srtt, both after {v.warmup_us / 1e6:g} s of warm-up; "
                  "ratio = sim/linux, green within tolerance (goodput ±5 %, RTT ±10 %, retx ±0.5 points, "
                  "JFI ±0.05), red outside; * = the difference exceeds the spread over repetitions (never with one "
                  "run a backend: no spread to exceed); "
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
        txt = f"{fmt_val(r.metric, r.sim.median)}  {fmt_val(r.metric, r.linux.median)}"
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
        if s.rechecked:
            verdict += " rechecked"
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
        txt = f"{fmt_val(r.metric, r.sim.median)} / {fmt_val(r.metric, r.linux.median)}"
        return txt if r.within is not False else f"**{txt}**"

    for s in v.scenarios:
        p, rows, lin = s.params, s.rows, s.runs["linux"]
        runs = f"{rows['goodput_steady'].sim.n}/{lin['ok']}" + (f" ({lin['suspect']} suspect)" if lin["suspect"] else "")
        lines.append("| " + " | ".join([
            str(p["cca"]), str(p["flows"]), str(p["rate"]), str(p["rtt"]), str(p["buffer"]), str(p["loss"]),
            pair(rows["goodput_steady"]), ratio(rows["goodput_steady"]), ratio(rows["goodput"]),
            pair(rows["rtt_mean_steady"]), ratio(rows["rtt_mean_steady"]), pair(rows["retrans_pct"]),
            pair(rows["jfi_steady"]), runs,
            (s.verdict if s.verdict != "disagree" else "**disagree**") + (" (rechecked)" if s.rechecked else "")])
            + " |")
    return "\n".join(lines) + "\n"


def write_outputs(v: Validation) -> dict[str, Path]:
    """validation.csv, validation.json and validation.html in the results directory."""
    from ccbench.report.page import write

    out = Path(v.out)
    paths = {"csv": out / "validation.csv", "json": out / "validation.json", "html": out / "validation.html"}
    for kind, text in (("csv", csv_text(v)), ("json", json_text(v)), ("html", html_page(v))):
        write(text, paths[kind])
    return paths
