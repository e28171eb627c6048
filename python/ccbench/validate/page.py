"""The validation's HTML page: a report view built with the report's page
pieces (ccbench.report.page): a ratio plot, the per-scenario table, suspect
runs, and per scenario every metric and the time series of both backends."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np

from ccbench.analysis.series import interval_rates
from ccbench.report.page import PALETTE, downsample, esc, layout, page, sig, table
from ccbench.validate.comparison import METRICS, MetricRow, Scenario, Validation, fmt_val, summary_line
from ccbench.validate.grid import study_text

def _ratio_figure(v: Validation) -> dict:
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
            text.append(f"{s.label}<br>{title}: sim {fmt_val(r.metric, r.sim.median)}, linux "
                        f"{fmt_val(r.metric, r.linux.median)} ({'Mbit/s' if r.metric.unit == 'bps' else 'ms'})"
                        f"<br>ratio {'–' if r.ratio is None else f'{r.ratio:.3f}'}"
                        + (" — exceeds the spread" if r.exceeds_spread else ""))
        data.append({"type": "scatter", "mode": "markers", "name": title, "x": labels, "y": ys,
                     "marker": {"size": 9 if i < 2 else 6, "color": PALETTE[i], "symbol": ["circle", "diamond", "x"][i]},
                     "error_y": {"type": "data", "symmetric": False, "array": hi, "arrayminus": lo,
                                 "color": PALETTE[i], "thickness": 1},
                     "text": text, "hoverinfo": "text", "visible": True if i < 2 else "legendonly"})
    lay = layout("sim / linux per scenario (bars: the range of ratios the repetitions allow)", "", "sim / linux")
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
                             "showlegend": j == 0, "x": sig(tt / 1e6, 6), "y": sig(yy / scale), "yaxis": axis,
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
    figures: dict[str, dict] = {"ratio-figure": _ratio_figure(v)}
    lazy: dict[str, list[str]] = {}
    parts = []
    title = f"ccbench validation: sim against linux (grid {v.grid.name})"
    parts.append(f"<h1>{esc(title)}</h1>")
    parts.append('<nav><a href="#summary">summary</a><a href="#ratios">ratios</a><a href="#table">table</a>'
                 '<a href="#suspect">suspect runs</a><a href="#scenarios">scenarios</a><a href="#method">method</a></nav>')
    parts.append('<h2 id="summary">Summary</h2>')
    parts.append(f"<p><b>{esc(summary_line(v))}.</b></p>")
    dis = [s for s in v.scenarios if s.verdict == "disagree"]
    if dis:
        parts.append("<p>Outside tolerance:</p><ul>" + "".join(
            f'<li><a href="#sc-{esc(s.config_id)}">{esc(s.label)}</a>: ' + ", ".join(
                f"{esc(k)} {'ratio ' + format(s.rows[k].ratio, '.3f') if s.rows[k].metric.kind == 'rel' and s.rows[k].ratio is not None else 'diff ' + format(s.rows[k].diff or 0, '+.3g')}"
                + (" (exceeds the spread)" if s.rows[k].exceeds_spread else " (within the spread)")
                for k in s.outside(judged_only=True)) + "</li>" for s in dis) + "</ul>")
    log = v.log.as_dict() if v.log else {}
    m = v.machine
    parts.append(
        f'<p class="muted">Grid <b>{esc(v.grid.name)}</b>: {esc(v.grid.describe())}; {v.reps} repetitions of '
        f"{v.duration_us / 1e6:g} s"
        + (f" ({v.recheck_reps} for the {len(v.rechecked())} scenarios rechecked)" if v.recheck_reps else "")
        + f"; warm-up {v.warmup_us / 1e6:g} s. Machine: {esc(m.get('cpus'))} CPUs "
        f"({esc(m.get('cpu', '?'))}), kernel {esc(m.get('kernel'))}, load average (1, 5, 15 min) at the "
        f"analysis {esc(' '.join(str(x) for x in m.get('loadavg_at_analysis', [])))}"
        + (f", before the linux runs {esc(' '.join(str(x) for x in log['load_before_linux']))}"
           if log.get("load_before_linux") else "")
        + (f", highest during them {log['load_during_linux_max']:.2f}" if log.get("load_during_linux_max") else "")
        + f". Command: <code>{esc(log.get('command') or 'ccbench validate')}</code>; results "
        f"<code>{esc(str(v.out))}</code>; ccbench {esc(m.get('ccbench'))}; made "
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
            txt = fmt_val(r.metric, sp.median)
            if sp.n > 1:
                return (f'<span title="min–max {fmt_val(r.metric, sp.min)}–{fmt_val(r.metric, sp.max)}, '
                        f'n={sp.n}">{esc(txt)}</span><br><span class="muted">{fmt_val(r.metric, sp.min)}–'
                        f"{fmt_val(r.metric, sp.max)}</span>")
            return esc(txt)
        cls = "" if r.within is None else ("" if r.within else "flag")
        star = ' <span title="the difference exceeds the spread over repetitions">*</span>' if r.exceeds_spread else ""
        return f'<span class="{cls}">{esc(txt)}</span>{star}'

    rows = []
    for s in v.scenarios:
        r = s.rows
        lin = s.runs["linux"]
        runs = f"{r['goodput_steady'].sim.n}/{lin['ok']}" + (f" ({lin['suspect']} suspect)" if lin["suspect"] else "")
        verdict = {"agree": "agree", "disagree": '<span class="flag">disagree</span>',
                   "no data": '<span class="flag">no data</span>'}[s.verdict] + (" (rechecked)" if s.rechecked else "")
        rows.append([f'<a href="#sc-{esc(s.config_id)}">{esc(s.label)}</a>',
                     cell(r["goodput_steady"], "sim"), cell(r["goodput_steady"], "linux"),
                     cell(r["goodput_steady"], "ratio"), cell(r["goodput"], "ratio"),
                     cell(r["rtt_mean_steady"], "sim"), cell(r["rtt_mean_steady"], "linux"),
                     cell(r["rtt_mean_steady"], "ratio"),
                     cell(r["retrans_pct"], "sim"), cell(r["retrans_pct"], "linux"),
                     cell(r["jfi_steady"], "sim"), cell(r["jfi_steady"], "linux"), runs, verdict])
    parts.append('<p class="muted">Goodput in Mbit/s (Σ over flows, after the warm-up), RTT in ms (mean sampled '
                 "srtt after the warm-up); median over repetitions, min–max below. Red: outside tolerance; "
                 "* the difference exceeds the spread over repetitions.</p>")
    parts.append(table(headers, rows, left=1, cls="summary"))

    # suspect runs
    parts.append('<h2 id="suspect">Suspect runs (left out)</h2>')
    sus = v.suspect_runs()
    if sus:
        parts.append(table(["scenario", "run", "why"], [[esc(a), f"<code>{esc(b)}</code>", esc(c_)]
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
            mrows.append([f"{esc(name)}{' (judged)' if mm.judged else ''}", esc(unit),
                          cell(r, "sim"), cell(r, "linux"), "–" if r.ratio is None else f"{r.ratio:.3f}",
                          "–" if r.diff is None else esc(fmt_val(mm, r.diff) if mm.unit else f"{r.diff:+.3f}"),
                          tol, within, "–" if r.exceeds_spread is None else ("yes" if r.exceeds_spread else "no")])
        badge = "" if s.verdict == "agree" else f'<span class="badge">{esc(s.verdict)}</span>'
        ids = ", ".join(f"{b}: " + " ".join(f"<code>{esc(x)}</code>" for x in s.runs[b]["run_ids"])
                        for b in ("sim", "linux"))
        parts.append(
            f'<details class="run" id="sc-{esc(s.config_id)}" data-run="{esc(s.config_id)}"><summary>'
            f"{esc(s.label)} <span class=\"muted\">config {esc(s.config_id)}</span>{badge}</summary>"
            f"<p class=\"muted\">runs {ids}</p>"
            + table(["metric", "unit", "sim median", "linux median", "sim/linux", "sim − linux", "tolerance",
                      "within", "exceeds spread"], mrows, left=1)
            + _per_run_table(s)
            + f'<div class="plot" id="{fid}"></div></details>')

    # method
    parts.append('<h2 id="method">Method</h2><ul>' + "".join(
        f"<li><b>{esc(m_.name)}</b>{' (judged)' if m_.judged else ''}: {esc(m_.doc)}; tolerance "
        f"{'none (reported)' if m_.tolerance is None else (f'±{m_.tolerance * 100:g} % of linux' if m_.kind == 'rel' else f'±{m_.tolerance:g} absolute')}</li>"
        for m_ in METRICS) + "</ul><p>A scenario agrees when every judged metric is within tolerance. The "
        "difference <i>exceeds the spread</i> when |median sim − median linux| is larger than both backends' "
        "min–max ranges over repetitions together and than 1 % (ccbench compare's rule). Suspect linux runs are "
        "left out of every number.</p>")
    parts.append(f"<details><summary>the grid as a study file</summary><pre>{esc(_study_text_of(v))}</pre>"
                 "</details>")

    text, _ = page(title, parts, figures, ["ratio-figure"], lazy)
    return text


def _per_run_table(s: Scenario) -> str:
    """Each stored run's judged numbers beside its emulator's lateness (linux):
    on short paths the kernel's numbers follow it; and the steal time on the
    emulator's CPU, which the lateness follows."""
    def num(x: object, div: float, fmt: str) -> str:
        return "–" if x is None else format(float(x) / div, fmt)

    rows = [[b, str(r["repetition"]), f"<code>{esc(r['run_id'])}</code>", esc(r["status"]),
             num(r.get("goodput_steady"), 1e6, ".2f"), num(r.get("rtt_mean_steady"), 1e3, ".2f"),
             num(r.get("late_pkts"), 1, ".0f"), num(r.get("lateness_p99_us"), 1, ".0f"),
             num(r.get("emu_cpu_steal"), 0.01, ".1f")]
            for b in ("sim", "linux") for r in s.runs[b].get("per_run", [])]
    if not rows:
        return ""
    return ('<p class="muted">Per run (– where a run is left out, or for the simulator, which has no emulator):'
            "</p>" + table(["backend", "rep", "run", "status", "goodput Mbit/s", "mean srtt ms",
                            "late packets", "lateness p99 µs", "steal on its CPU %"], rows, left=4))


def _study_text_of(v: Validation) -> str:
    return study_text(v.grid, f"{v.duration_us / 1e6:g}s", v.reps)
