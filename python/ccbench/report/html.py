"""The HTML report: one self-contained file (no network needed to view it).

Plots are Plotly figures (zoom, hover, legend toggles). plotly.js comes from
the `plotly` Python package and is embedded inline; the figures' data is one
JSON document in a <script type="application/json" id="ccbench-data"> element,
so tests and scripts can read exactly what is drawn. Per-run plots are drawn
when their section is opened (or linked to with #run-<id>), which keeps a
report of hundreds of runs quick to open; long time series are downsampled
for display (min/max per bucket, so spikes survive) to a total point budget.

Sections: study and environment; summary table; sweep plots (metric vs each
swept parameter, one line per flow class and other swept parameter, mean
with a 95 % confidence band (Student's t) and every repetition as a dot;
Mathis and Padhye beside loss sweeps); flagged runs; JFI over time per configuration; RPC
latency CDFs; per-run time series (goodput, cwnd, RTT, bottleneck backlog,
JFI) and per-flow metrics.
"""

from __future__ import annotations

import platform
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from ccbench import __version__, console
from ccbench.analysis.metrics import RunMetrics, interval_rates
from ccbench.analysis.study import IDENTICAL_NOTE, Analysis, ConfigResult
from ccbench.analysis.metrics import METRICS
from ccbench.analysis.sweeps import SweepPlot, sweep_plot
from ccbench.report.page import PALETTE, downsample, esc, layout, page, rgba, sig, table, write

SWEEP_METRICS = ("goodput", "jfi", "retrans", "rtt", "queue_delay", "utilisation", "rpc_p99")
POINT_BUDGET = 1_500_000  # numbers in all per-run series together
MAX_POINTS = 1500  # per series
MIN_POINTS = 120


# -- figures --------------------------------------------------------------------


def sweep_figure(plot: SweepPlot) -> dict:
    allv = [v for s in plot.series for p in s.points for v in p.spread.values]
    div, yunit = console.scale(plot.unit, allv)
    ytitle = METRICS[plot.metric].label + (f" ({yunit})" if yunit else "")
    xdiv, xunit = console.scale("bps", [p.x for s in plot.series for p in s.points if p.x]) if plot.x_unit == "bit/s" \
        else (1.0, plot.x_unit)
    data = []

    def xval(p):
        return p.x / xdiv if plot.numeric and p.x is not None else p.x_label

    def y(v):
        return None if v is None else v / div

    def ci_text(sp) -> str:
        if sp.ci_low is None:
            return ""
        return f" (95% CI {console.value(sp.ci_low, plot.unit)}–{console.value(sp.ci_high, plot.unit)})"

    for i, s in enumerate(plot.series):
        colour = PALETTE[i % len(PALETTE)]
        pts = [p for p in s.points if p.spread.n]
        xs = [xval(p) for p in pts]
        hover = [f"{esc(s.label)}<br>{esc(plot.x_key)} = {esc(p.x_label)}<br>mean {console.value(p.spread.mean, plot.unit)}"
                 f"{ci_text(p.spread)}<br>"
                 f"median {console.value(p.spread.median, plot.unit)}, min–max {console.value(p.spread.min, plot.unit)}–"
                 f"{console.value(p.spread.max, plot.unit)}, n={p.spread.n}" for p in pts]
        line: dict = {"type": "scatter", "mode": "lines+markers", "name": s.label, "legendgroup": s.label,
                      "x": xs, "y": [y(p.spread.mean) for p in pts], "line": {"color": colour},
                      "text": hover, "hoverinfo": "text", "meta": {"role": "mean"}}
        lo = [p.spread.drawn_ci[0] for p in pts]
        hi = [p.spread.drawn_ci[1] for p in pts]
        if plot.numeric and len(pts) > 1:
            data.append({"type": "scatter", "mode": "lines", "name": f"{s.label} 95% CI", "legendgroup": s.label,
                         "showlegend": False, "hoverinfo": "skip", "fill": "toself",
                         "fillcolor": rgba(colour, 0.18), "line": {"width": 0, "color": rgba(colour, 0)},
                         "x": xs + xs[::-1],
                         "y": [y(v) for v in hi] + [y(v) for v in lo][::-1],
                         "meta": {"role": "band"}})
        else:
            line["error_y"] = {"type": "data", "symmetric": False,
                               "array": [y(h - p.spread.mean) for p, h in zip(pts, hi)],
                               "arrayminus": [y(p.spread.mean - v) for p, v in zip(pts, lo)],
                               "color": colour}
        data.append(line)
        rx, ry, rt = [], [], []
        for p in pts:
            for v, rid in zip(p.spread.values, p.run_ids):
                rx.append(xval(p))
                ry.append(y(v))
                rt.append(f"run {rid}: {console.value(v, plot.unit)}")
        data.append({"type": "scatter", "mode": "markers", "name": f"{s.label} runs", "legendgroup": s.label,
                     "showlegend": False, "x": rx, "y": ry, "text": rt, "hoverinfo": "text",
                     "marker": {"size": 5, "color": rgba(colour, 0.45)}, "meta": {"role": "runs"}})
    index = {s.label: i for i, s in enumerate(plot.series)}
    for m in plot.models:  # in the colour of the series it models: Mathis dashed, Padhye dotted
        dash = "dash" if m.label.startswith("Mathis") else "dot"
        data.append({"type": "scatter", "mode": "lines+markers",
                     "name": f"{m.label} (at that series' measured mean RTT, capped at link rate)",
                     "x": [xval(p) for p in m.points], "y": [y(p.spread.median) for p in m.points],
                     "line": {"color": PALETTE[index.get(m.of, 0) % len(PALETTE)], "dash": dash, "width": 1},
                     "text": [f"{m.label}: {console.value(p.spread.median, plot.unit)} at RTT {console.ms(p.rtt_us, short=True)}"
                              for p in m.points], "hoverinfo": "text", "meta": {"role": "model"}})
    xtitle = plot.x_key + (f" ({xunit})" if xunit else "")
    lay = layout(f"{METRICS[plot.metric].label} vs {plot.x_key}", xtitle, ytitle)
    if not plot.numeric:
        lay["xaxis"]["type"] = "category"
    if plot.metric in ("jfi", "utilisation"):
        lay["yaxis"]["range"] = [0, 1.05]
    return {"data": data, "layout": lay}


def run_figure(rm: RunMetrics, max_points: int) -> dict:
    """Goodput, cwnd, RTT per flow, bottleneck backlog and JFI over time, stacked."""
    run = rm.run
    rows = [("goodput (Mbit/s)", "y"), ("cwnd (KB)", "y2"), ("smoothed RTT (ms)", "y3"),
            ("backlog (KB)", "y4"), ("JFI (1 s bins)", "y5")]
    data = []
    for i, f in enumerate(sorted(run.flows, key=lambda f: f["flow_id"])):
        fid = int(f["flow_id"])
        s = run.series.get(fid)
        if s is None:
            continue
        name = f"flow {fid} ({f.get('group_name')})"
        colour = PALETTE[i % len(PALETTE)]
        t, rate = interval_rates(s, float(f.get("start_us") or 0))
        for col, vals, t_arr, scale, axis in (
            ("goodput", rate, t, 1e6, "y"),
            ("cwnd", s.cwnd_bytes, s.time_us, 1e3, "y2"),
            ("rtt", s.srtt_us, s.time_us, 1e3, "y3"),
        ):
            if vals is None or len(vals) == 0:
                continue
            if col == "rtt":  # srtt 0 = no RTT measured yet
                vals = np.where(np.asarray(vals, float) > 0, vals, np.nan)
            tt, vv = downsample(np.asarray(t_arr, float), np.asarray(vals, float), max_points)
            data.append({"type": "scattergl" if len(tt) > 5000 else "scatter", "mode": "lines",
                         "name": name, "legendgroup": name, "showlegend": col == "goodput",
                         "x": sig(tt / 1e6, 6), "y": sig(vv / scale), "yaxis": axis,
                         "line": {"color": colour, "width": 1.5}, "meta": {"series": col, "flow": fid}})
    # The dumbbell's bottleneck; in a network, the link that queued the most.
    qname = "bottleneck" if "bottleneck" in run.queue else max(
        run.queue, key=lambda n: float(np.nanmean(run.queue[n]["backlog_bytes"])) if len(run.queue[n]["time_us"]) else -1.0,
        default=None)
    q = run.queue.get(qname) if qname else None
    if q is not None and len(q["time_us"]):
        tt, vv = downsample(q["time_us"], q["backlog_bytes"], max_points)
        data.append({"type": "scatter", "mode": "lines", "name": f"{qname} backlog", "x": sig(tt / 1e6, 6),
                     "y": sig(vv / 1e3), "yaxis": "y4", "line": {"color": "#444", "width": 1.5},
                     "meta": {"series": "backlog"}})
    if rm.jfi_values:
        data.append({"type": "scatter", "mode": "lines+markers", "name": "JFI (bulk flows)",
                     "x": [(t + 500_000) / 1e6 for t in rm.jfi_times_us], "y": sig(np.asarray(rm.jfi_values)),
                     "yaxis": "y5", "line": {"color": "#000", "width": 1.5}, "meta": {"series": "jfi"}})
    n = len(rows)
    gap = 0.03
    h = (1 - gap * (n - 1)) / n
    lay = {"height": 1000, "margin": {"l": 70, "r": 20, "t": 90, "b": 40}, "hovermode": "x",
           "title": {"text": f"run {run.run_id}: {run.label}", "font": {"size": 14}, "y": 0.99, "yanchor": "top"},
           "xaxis": {"title": {"text": "time (s)"}, "anchor": "y5", "range": [0, run.duration_us / 1e6]},
           "legend": {"orientation": "h", "y": 1.01, "yanchor": "bottom"},
           "shapes": [{"type": "rect", "xref": "x", "yref": "paper", "x0": rm.window[0] / 1e6,
                       "x1": rm.window[1] / 1e6, "y0": 0, "y1": 1, "fillcolor": "rgba(0,128,0,0.05)",
                       "line": {"width": 0}, "layer": "below"}]}
    for k, (title, axis) in enumerate(rows):
        key = "yaxis" if axis == "y" else f"yaxis{axis[1:]}"
        top = 1 - k * (h + gap)
        lay[key] = {"title": {"text": title, "font": {"size": 11}}, "domain": [max(top - h, 0), top],
                    "rangemode": "tozero", "anchor": "x"}
        if axis == "y5":
            lay[key]["range"] = [0, 1.05]
    for a in rm.anomalies:
        if a.start_us is not None and a.end_us is not None and a.kind == "collapse":
            lay["shapes"].append({"type": "rect", "xref": "x", "yref": "paper", "x0": a.start_us / 1e6,
                                  "x1": a.end_us / 1e6, "y0": 0, "y1": 1, "fillcolor": "rgba(214,39,40,0.12)",
                                  "line": {"width": 0}, "layer": "below"})
    return {"data": data, "layout": lay}


def network_figure(rm: RunMetrics, max_points: int) -> Optional[dict]:
    """Each queueing link's utilisation over time, with the run's events on
    it: the path controller's states (its action periods shaded) and route
    changes. None for a dumbbell run without events."""
    run = rm.run
    links = {name: q for name, q in run.queue.items() if "utilisation" in q and len(q["time_us"])}
    if not links or (not run.events and not (run.config or {}).get("network")):
        return None
    watched = {e["link"] for e in run.events if e.get("link")}
    data = []
    for i, (name, q) in enumerate(sorted(links.items())):
        tt, vv = downsample(q["time_us"], q["utilisation"], max_points)
        back = name.endswith("/back") or name == "reverse"
        data.append({"type": "scatter", "mode": "lines", "name": name + (" (watched)" if name in watched else ""),
                     "x": sig(tt / 1e6, 6), "y": sig(vv * 100), "visible": "legendonly" if back else True,
                     "line": {"color": PALETTE[i % len(PALETTE)], "width": 2.5 if name in watched else 1.5},
                     "meta": {"series": "utilisation", "link": name}})
    shapes, notes = [], []
    action_from = None
    for e in run.events:
        t = float(e["time_us"]) / 1e6
        if e["kind"] == "controller" and e.get("flow_id") is None:
            state = str(e.get("state"))
            if state == "action":
                action_from = t
            elif state == "released" and action_from is not None:
                shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": action_from, "x1": t, "y0": 0,
                               "y1": 1, "fillcolor": "rgba(255,127,14,0.12)", "line": {"width": 0}, "layer": "below"})
                action_from = None
            text = state
        else:
            text = f"flow {e.get('flow_id')} moved" if e.get("flow_id") is not None else str(e["kind"])
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": t, "x1": t, "y0": 0, "y1": 1,
                       "line": {"color": "#d62728" if e["kind"] == "controller" else "#555", "width": 1,
                                "dash": "dot"}})
        notes.append({"x": t, "y": 1, "xref": "x", "yref": "paper", "text": esc(text), "showarrow": False,
                      "textangle": -90, "xanchor": "right", "yanchor": "top", "font": {"size": 10},
                      "hovertext": esc(str(e.get("detail") or ""))})
    if action_from is not None:  # still in action at the end of the run
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": action_from, "x1": run.duration_us / 1e6,
                       "y0": 0, "y1": 1, "fillcolor": "rgba(255,127,14,0.12)", "line": {"width": 0},
                       "layer": "below"})
    lay = layout(f"run {run.run_id}: link utilisation and events", "time (s)", "utilisation (% of the link rate)")
    lay["yaxis"]["range"] = [0, 105]
    lay["xaxis"]["range"] = [0, run.duration_us / 1e6]
    lay["shapes"] = shapes
    lay["annotations"] = notes
    return {"data": data, "layout": lay}


def jfi_figure(c: ConfigResult) -> Optional[dict]:
    data = []
    for rm in c.runs:
        if rm.jfi_values:
            data.append({"type": "scatter", "mode": "lines+markers", "name": f"rep {rm.run.repetition} ({rm.run_id})",
                         "x": [(t + 500_000) / 1e6 for t in rm.jfi_times_us], "y": sig(np.asarray(rm.jfi_values)),
                         "marker": {"size": 4}})
    if not data:
        return None
    lay = layout(f"JFI over time: {c.label()}", "time (s)", "JFI of bulk flows (1 s bins)")
    lay["yaxis"]["range"] = [0, 1.05]
    return {"data": data, "layout": lay}


def _cdf_points(lat: np.ndarray, max_points: int = 400) -> tuple[list, list]:
    """Points of the empirical CDF (x sorted latencies, y = rank/n), thinned
    to at most ~max_points while keeping the tail (top 1 %) dense."""
    xs = np.sort(lat)
    n = len(xs)
    if n == 0:
        return [], []
    if n <= max_points:
        k = np.arange(n)
    else:
        probs = np.concatenate((np.linspace(0, 1, max_points // 2), 1 - np.logspace(-1, -5, max_points // 2)))
        k = np.unique(np.clip(np.round(probs * (n - 1)).astype(int), 0, n - 1))
    return sig(xs[k] / 1e3), sig((k + 1) / n, 6)


def cdf_figure(c: ConfigResult) -> Optional[dict]:
    pools: dict[str, list] = {}
    for rm in c.runs:
        for f in rm.flows:
            r = rm.run.rpcs.get(f.flow_id)
            if r is not None and len(r["latency_us"]):
                pools.setdefault(f.group, []).append(r["latency_us"])
    if not pools:
        return None
    data = []
    for i, (g, arrs) in enumerate(pools.items()):
        lat = np.concatenate(arrs)
        x, y = _cdf_points(lat)
        data.append({"type": "scatter", "mode": "lines", "name": f"{g} ({len(lat)} RPCs, {len(arrs)} flows)",
                     "x": x, "y": y, "line": {"shape": "hv", "color": PALETTE[i % len(PALETTE)]},
                     "meta": {"class": g}})
    lay = layout(f"RPC completion time CDF: {c.label()}", "completion time (ms)", "fraction of RPCs")
    lay["xaxis"]["type"] = "log"
    lay["yaxis"]["range"] = [0, 1.02]
    return {"data": data, "layout": lay}


# -- HTML ---------------------------------------------------------------------------


def _num(v: Optional[float], div: float) -> str:
    return console.NONE if v is None else console.sig3(v / div)


def _spread_cell(c: ConfigResult, key: str, div: float) -> str:
    """Median over repetitions; min–max below it; the 95 % CI of the mean on hover."""
    s = c.stats.get(key)
    if s is None or not s.n:
        return "–"
    txt = esc(_num(s.median, div))
    if s.n > 1:
        tip = f"mean {_num(s.mean, div)}, 95% CI {_num(s.ci_low, div)}–{_num(s.ci_high, div)}, n={s.n}"
        txt = (f'<span title="{esc(tip)}">{txt}<br><span class="muted">{esc(_num(s.min, div))}–'
               f"{esc(_num(s.max, div))}</span></span>")
    return txt


def summary_html(a: Analysis) -> str:
    keys = a.param_keys()
    has_rpc = any(cm.rpc_count for rm in a.runs() for cm in rm.classes.values())
    gp = [v for c in a.configs for k, s in c.stats.items() if k.startswith("goodput_mean_bps[") for v in s.values]
    gdiv, gunit = console.scale("bps", gp)
    # a directory holding two versions of a study (NAME v2), or two backends, has
    # configurations with the same config id: the row says whose it is
    origin = [attr for attr in ("study", "backend") if len({getattr(c, attr) for c in a.configs}) > 1]
    headers = [*origin, "config", *keys, "class", "flows", f"goodput/flow {gunit}", "JFI", "utilisation", "retx %",
               "RTT mean ms", "RTT p99 ms", "queueing ms"]
    if has_rpc:
        headers += ["RPC p50 ms", "RPC p99 ms", "RPC p99.9 ms"]
    headers += ["reps", "anomalies"]
    rows, firsts = [], []
    for c in a.configs:
        classes = c.classes or ["–"]
        firsts.append(len(rows))
        for i, g in enumerate(classes):
            first = i == 0
            nflows = max((rm.classes[g].flows for rm in c.runs if g in rm.classes), default=0)
            row = [*[esc(getattr(c, attr)) if first else "" for attr in origin],
                   f'<code>{esc(c.config_id[:8])}</code>' if first else "",
                   *[esc(c.params.get(k, "–")) if first else "" for k in keys],
                   esc(g), str(nflows),
                   _spread_cell(c, f"goodput_mean_bps[{g}]", gdiv),
                   _spread_cell(c, "jfi", 1) if first else "",
                   _spread_cell(c, "utilisation", 1) if first else "",
                   _spread_cell(c, f"retrans_pct[{g}]", 1),
                   _spread_cell(c, f"rtt_mean_us[{g}]", 1e3),
                   _spread_cell(c, f"rtt_p99_us[{g}]", 1e3),
                   _spread_cell(c, f"queue_delay_mean_us[{g}]", 1e3)]
            if has_rpc:
                row += [_spread_cell(c, f"{m}[{g}]", 1e3) for m in ("rpc_p50_us", "rpc_p99_us", "rpc_p999_us")]
            reps = f"{c.reps}" + (f" ({c.suspect} suspect)" if c.suspect else "") + (
                f' <span class="flag">({c.failed} failed)</span>' if c.failed else "") + (
                " (identical)" if c.identical else "")
            row += [reps if first else "", f'<span class="flag">{esc(c.anomaly_text())}</span>' if first else ""]
            rows.append(row)
    note = ('<p class="muted">Per configuration: the median over repetitions, below it the min–max over '
            "repetitions (hover for the mean and its 95% confidence interval, Student's t). goodput/flow = mean "
            "goodput of the class's flows; JFI over all flows; utilisation = payload delivered / bottleneck "
            "capacity; queueing = mean RTT − min RTT."
            + (f" {esc(IDENTICAL_NOTE[0].upper() + IDENTICAL_NOTE[1:])}." if any(c.identical for c in a.configs) else "")
            + "</p>")
    return note + table(headers, rows, left=len(origin) + 1 + len(keys) + 1, first_rows=firsts, cls="summary")


def _flow_table(rm: RunMetrics) -> str:
    headers = ["flow", "class", "cca", "kind", "start", "goodput", "steady goodput", "bytes", "retx",
               "retx %", "RTT min", "RTT mean", "RTT p50 (srtt)", "RTT p99", "queueing mean", "queueing p99"]
    rows = []
    for f in rm.flows:
        rows.append([str(f.flow_id), esc(f.group), esc(f.cca), esc(f.kind), f"{f.start_us / 1e6:.3f} s",
                     console.rate(f.goodput_bps, short=True), console.rate(f.goodput_steady_bps, short=True),
                     "–" if f.bytes is None else f"{f.bytes:,}", "–" if f.retrans_segs is None else str(f.retrans_segs),
                     console.value(f.retrans_pct, ""), console.ms(f.rtt_min_us, short=True), console.ms(f.rtt_mean_us, short=True), console.ms(f.rtt_p50_us, short=True),
                     console.ms(f.rtt_p99_us, short=True), console.ms(f.queue_delay_mean_us, short=True), console.ms(f.queue_delay_p99_us, short=True)])
    return table(headers, rows, left=4)


def _run_section(rm: RunMetrics, flags: Sequence[Any], fig_id: str, net_fig_id: Optional[str] = None) -> str:
    run = rm.run
    badges = "".join(f'<span class="badge">{esc(k)}</span>' for k in dict.fromkeys(f.kind for f in flags))
    if run.status == "suspect":
        badges += '<span class="badge sus">suspect</span>'
    extra = []
    held = ""
    if rm.steady_held_bytes and rm.steady_held_bytes >= 1000:
        b = rm.steady_held_bytes
        size = console.size(b)
        held = f", not counting {size} delivered in it that crossed the link before it"
    extra.append(f"utilisation {console.value(rm.utilisation, '')} (steady {console.value(rm.utilisation_steady, '')}{held}), "
                 f"JFI {console.value(rm.jfi, '')}, bottleneck backlog mean {console.size(rm.backlog_mean_bytes)} / max "
                 f"{console.size(rm.backlog_max_bytes)}, drops {rm.drops if rm.drops is not None else '–'}, "
                 f"ECN marks {rm.ecn_marks if rm.ecn_marks is not None else '–'}, random losses "
                 f"{rm.random_losses if rm.random_losses is not None else '–'}; steady-state window "
                 f"{rm.window[0] / 1e6:.2f}–{rm.window[1] / 1e6:.2f} s (shaded green)")
    for cv in rm.convergence:
        when = "never within the epoch" if cv.converged_after_us is None else f"after {cv.converged_after_us / 1e6:.1f} s"
        extra.append(f"flow {cv.flow_id} joined at {cv.join_us / 1e6:.2f} s: converged to fairness {when} "
                     f"(flows {', '.join(map(str, cv.flows))}, epoch until {cv.epoch_end_us / 1e6:.2f} s)")
    items = "".join(f"<li>{esc(x)}</li>" for x in extra)
    items += "".join(f'<li class="flag">{esc(f.kind)}: {esc(f.reason)}</li>' for f in flags)
    return (f'<details class="run" id="run-{esc(run.run_id)}" data-run="{esc(run.run_id)}">'
            f"<summary><code>{esc(run.run_id)}</code> {esc(run.label)} · {esc(run.backend)} · seed {run.seed}"
            f"{badges}</summary><ul>{items}</ul>{_flow_table(rm)}"
            f'<div class="plot" id="{fig_id}"></div>'
            + (f'<div class="plot" id="{net_fig_id}"></div>' if net_fig_id else "") + "</details>")


def build(a: Analysis, title: Optional[str] = None) -> tuple[str, dict]:
    """The report's HTML text and its data document (figures by id)."""
    figures: dict[str, dict] = {}
    eager: list[str] = []
    lazy: dict[str, list[str]] = {}
    parts: list[str] = []
    study_names = [s["study"] for s in a.studies] or sorted({c.study for c in a.configs})
    title = title or f"ccbench report: {', '.join(study_names) or 'no runs'}"
    runs = a.runs()
    flags = a.flags()

    # -- study and environment
    parts.append(f"<h1>{esc(title)}</h1>")
    parts.append('<nav><a href="#summary">summary</a><a href="#sweeps">sweeps</a><a href="#flagged">flagged runs</a>'
                 '<a href="#jfi">JFI over time</a><a href="#rpc">RPC latency</a><a href="#runs">runs</a></nav>')
    parts.append('<h2 id="study">Study and environment</h2>')
    for s in a.studies:
        parts.append(f"<p><b>{esc(s['study'])}</b> — study file <code>{esc(s.get('path') or '–')}</code>; first run "
                     f"{esc(s.get('first_run_at') or '–')}, last {esc(s.get('last_run_at') or '–')} (UTC); "
                     f"{s.get('runs', 0)} runs: {s.get('ok', 0)} ok, {s.get('suspect', 0)} suspect, "
                     f"{s.get('failed', 0)} failed.</p>")
        if s.get("source_text"):
            parts.append(f"<details><summary>study file</summary><pre>{esc(s['source_text'])}</pre></details>")
    env_rows = []
    for backend in sorted({str(r.run.backend) for r in runs}):
        rs = [r.run for r in runs if str(r.run.backend) == backend]
        versions = sorted({str(r.tool_version) for r in rs})
        wall = sum(r.wall_time_s or 0 for r in rs)
        env_rows.append([esc(backend), str(len(rs)), esc(", ".join(versions)), f"{wall:.1f} s"])
    if env_rows:
        parts.append(table(["backend", "finished runs", "ccbench version", "total wall time"], env_rows, left=1))
    st = next(iter(a.settings.values()), None)
    if st is not None:
        sa = "default rule" if st.steady_after_us is None else f"{st.steady_after_us / 1e6:g} s"
        parts.append(f'<p class="muted">Analysis settings: steady state after {sa}; collapse below '
                     f"{st.collapse_fraction:g} × fair share for ≥ {st.collapse_min_us / 1e6:g} s with the link "
                     f"≥ {st.busy_fraction:g} busy; converged at JFI ≥ {st.converge_jfi:g}. Report made by ccbench "
                     f"{esc(__version__)} (Python {esc(sys.version.split()[0])}, {esc(platform.platform())}) at "
                     f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M')} UTC from {esc(a.source)}.</p>")
    # two versions of a study share labels and config ids: name the study where it is not the only one
    several = len({c.study for c in a.configs}) > 1

    def whose(study: str) -> str:
        return f"{study}: " if several else ""

    if a.failed_runs:
        parts.append("<p class=\"flag\">Failed runs (not analysed): " + ", ".join(
            f"<code>{esc(r.run_id)}</code> {esc(whose(r.study))}"
            f"({esc((r.error or '').strip().splitlines()[0] if r.error else '')})"
            for r in a.failed_runs) + "</p>")

    # -- summary
    parts.append('<h2 id="summary">Summary</h2>')
    parts.append(summary_html(a) if a.configs else "<p>No runs.</p>")

    # -- sweeps
    parts.append('<h2 id="sweeps">Sweeps</h2>')
    swept = [k for k in a.param_keys() if len({str(c.params.get(k)) for c in a.configs}) > 1]
    has_rpc = any(cm.rpc_count for rm in runs for cm in rm.classes.values())
    if not swept:
        parts.append("<p class=\"muted\">Nothing swept: no sweep plots.</p>")
    cells = []
    for x in swept:
        for metric in SWEEP_METRICS:
            if metric.startswith("rpc") and not has_rpc:
                continue
            plot = sweep_plot(a, metric, x, "class")
            if not any(p.spread.n for s in plot.series for p in s.points):
                continue
            fid = f"sweep-{len(figures)}"
            figures[fid] = sweep_figure(plot)
            eager.append(fid)
            cells.append(f'<div class="plot" id="{fid}"></div>')
    if cells:
        parts.append('<p class="muted">Lines: mean over repetitions; band / error bars: 95% CI (Student\'s t) of the '
                     "mean; dots: every repetition. Beside loss sweeps: the Mathis (dashed) and Padhye (dotted) models "
                     "for each series of bulk flows, at that series' own measured RTT.</p>")
        parts.append('<div class="grid">' + "".join(cells) + "</div>")

    # -- flagged runs
    parts.append('<h2 id="flagged">Flagged runs</h2>')
    if flags:
        counts = [f"{whose(c.study)}{c.label()}: {c.anomaly_text()}" for c in a.configs if c.anomaly_text()]
        if counts:
            parts.append("<ul>" + "".join(f"<li>{esc(x)}</li>" for x in counts) + "</ul>")
        labels = {r.run_id: whose(r.run.study) + r.run.label for r in runs}
        parts.append(table(["run", "configuration", "flag", "reason"], [
            [f'<a class="flagged-run" href="#run-{esc(f.run_id)}"><code>{esc(f.run_id)}</code></a>',
             esc(labels.get(f.run_id, "")), esc(f.kind), esc(f.reason)] for f in flags], left=4))
    else:
        parts.append("<p>No run flagged.</p>")

    def figure_grid(anchor: str, title: str, make, prefix: str, empty: str) -> None:
        """One plot per configuration that has something to show."""
        parts.append(f'<h2 id="{anchor}">{title}</h2><div class="grid">')
        shown = 0
        for c in a.configs:
            fig = make(c)
            if fig is not None:
                fig["layout"]["title"]["text"] = whose(c.study) + fig["layout"]["title"]["text"]
                fid = f"{prefix}-{len(figures)}"
                figures[fid] = fig
                eager.append(fid)
                parts.append(f'<div class="plot" id="{fid}"></div>')
                shown += 1
        parts.append("</div>")
        if not shown:
            parts.append(f'<p class="muted">{empty}</p>')

    figure_grid("jfi", "JFI over time", jfi_figure, "jfi", "No bin had a bulk flow active throughout.")
    figure_grid("rpc", "RPC latency", cdf_figure, "cdf", "No RPC flows.")

    # -- runs
    parts.append('<h2 id="runs">Runs</h2><p class="muted">Open a run for its time series (downsampled for display '
                 "where long).</p>")
    n_series = sum(len(rm.run.series) * 3 + 2 for rm in runs) or 1
    max_points = int(min(MAX_POINTS, max(MIN_POINTS, POINT_BUDGET // (2 * n_series))))
    flags_by_run: dict[str, list] = {}
    for f in flags:
        flags_by_run.setdefault(f.run_id, []).append(f)
    for c in a.configs:
        parts.append(f"<h3>{esc(whose(c.study) + c.label())} <span class=\"muted\">config {esc(c.config_id)}</span></h3>")
        for rm in c.runs:
            fid = f"run-plot-{rm.run_id}"
            figures[fid] = run_figure(rm, max_points)
            lazy[rm.run_id] = [fid]
            net = network_figure(rm, max_points)
            net_fid = None
            if net is not None:
                net_fid = f"net-plot-{rm.run_id}"
                figures[net_fid] = net
                lazy[rm.run_id].append(net_fid)
            parts.append(_run_section(rm, flags_by_run.get(rm.run_id, []), fid, net_fid))

    # the numbers of the summary table, for scripts (every view's numbers agree: tests/test_views.py)
    stats = [{"study": c.study, "backend": c.backend, "config_id": c.config_id, "params": c.params,
              "stats": {k: {f: getattr(s, f) for f in ("n", "median", "mean", "ci_low", "ci_high", "min", "max")}
                        for k, s in c.stats.items()}} for c in a.configs]
    return page(title, parts, figures, eager, lazy, [f.as_dict() for f in flags], {"configs": stats})


def write_report(a: Analysis, out: str | Path, title: Optional[str] = None) -> Path:
    text, _ = build(a, title)
    return write(text, out)
