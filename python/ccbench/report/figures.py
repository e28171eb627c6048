"""Figures for papers: one sweep plot as PNG, SVG or PDF (matplotlib, no display).

The same series as the HTML report's sweep plots (ccbench.analysis.sweeps):
the line is the mean over repetitions, the band (numeric x) or error bars
(categorical x) the 95 % confidence interval (Student's t) of the mean, small
dots every repetition; beside loss sweeps the Mathis and Padhye models.
"""

from __future__ import annotations

from pathlib import Path

from typing import Any

from ccbench.analysis.metrics import METRICS
from ccbench.analysis.sweeps import SweepPlot
from ccbench.console import scale

FORMATS = ("png", "svg", "pdf")

# Series i gets colour i mod 10 (matplotlib's ten-colour cycle) and marker
# i div 10, so no two of the first 120 series share both; the line style
# changes after every 120 as well. Up to ten series look as they always did.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "p", "h")
LINESTYLES = ("-", "--", "-.", ":")


def series_style(i: int) -> tuple[str, str, str]:
    """(colour, marker, line style) of the i-th series of a figure."""
    per_style = 10 * len(MARKERS)
    return f"C{i % 10}", MARKERS[(i // 10) % len(MARKERS)], LINESTYLES[(i // per_style) % len(LINESTYLES)]


def sweep_figure(plot: SweepPlot, width_in: float = 6.0, height_in: float = 4.0) -> Any:
    """The sweep plot as a matplotlib Figure (not shown; see save_figure)."""
    from matplotlib.figure import Figure

    allv = [v for s in plot.series for p in s.points for v in p.spread.values]
    div, yunit = scale(plot.unit, allv)
    xdiv, xunit = scale("bps", [p.x for s in plot.series for p in s.points if p.x]) if plot.x_unit == "bit/s" \
        else (1.0, plot.x_unit)
    cats = list(dict.fromkeys(p.x_label for s in plot.series for p in s.points))

    def xv(p):
        return p.x / xdiv if plot.numeric else cats.index(p.x_label)

    fig = Figure(figsize=(width_in, height_in), constrained_layout=True)
    ax = fig.subplots()
    for i, s in enumerate(plot.series):
        pts = [p for p in s.points if p.spread.n]
        if not pts:
            continue
        colour, marker, line = series_style(i)
        xs = [xv(p) for p in pts]
        mean = [p.spread.mean / div for p in pts]
        lo = [p.spread.drawn_ci[0] / div for p in pts]
        hi = [p.spread.drawn_ci[1] / div for p in pts]
        if plot.numeric and len(pts) > 1:
            ax.plot(xs, mean, color=colour, marker=marker, linestyle=line, label=s.label, markersize=4)
            ax.fill_between(xs, lo, hi, color=colour, alpha=0.2, linewidth=0)
        else:
            ax.errorbar(xs, mean, yerr=[[m - a for m, a in zip(mean, lo)], [b - m for m, b in zip(mean, hi)]],
                        color=colour, marker=marker, linestyle=line, label=s.label, markersize=4, capsize=3)
        rx = [xv(p) for p in pts for _ in p.spread.values]
        ry = [v / div for p in pts for v in p.spread.values]
        ax.scatter(rx, ry, s=6, color=colour, marker=marker, alpha=0.4, linewidths=0)
    index = {s.label: i for i, s in enumerate(plot.series)}
    for m in plot.models:  # in the colour of the series it models: Mathis dashed, Padhye dotted
        style = "--" if m.label.startswith("Mathis") else ":"
        ax.plot([xv(p) for p in m.points], [p.spread.median / div for p in m.points], style,
                color=series_style(index.get(m.of, 0))[0], marker=".", linewidth=1, label=f"{m.label} (its RTT)")
    if not plot.numeric:
        ax.set_xticks(range(len(cats)))
        ax.set_xticklabels(cats)
    ax.set_xlabel(plot.x_key + (f" ({xunit})" if xunit else ""))
    ax.set_ylabel(METRICS[plot.metric].label + (f" ({yunit})" if yunit else ""))
    ax.set_ylim(bottom=0)
    if plot.metric in ("jfi", "utilisation"):
        ax.set_ylim(0, 1.05)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, frameon=False)
    return fig


def save_figure(fig: Any, out: str | Path, fmt: str = "png", dpi: int = 200) -> Path:
    """Write a figure as PNG, SVG or PDF."""
    from ccbench.errors import UsageError

    if fmt not in FORMATS:
        raise UsageError(f"{out}: cannot write a figure as {fmt!r} (allowed: {', '.join(FORMATS)})")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format=fmt, dpi=dpi, metadata={"Software": "ccbench"} if fmt == "png" else None)
    return out
