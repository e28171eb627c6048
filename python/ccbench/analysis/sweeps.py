"""Sweep series: a metric against a swept parameter, one series per group.

Used by the HTML report and ``ccbench plot``. A *point* is the Spread (see
stats.py) over the repetitions of the configurations at one x value of one
series.

Metrics (``--metric``): the names of ccbench.analysis.metrics.METRICS — per
group of flows e.g. goodput (mean per-flow goodput, bits/s), goodput_sum,
goodput_steady, retrans (%), rtt, rtt_p99, queue_delay, rpc_p99; per run
jfi, utilisation, drops, random_losses, convergence (runs that never converged
are left out); per link of a general topology link_utilisation, link_backlog,
link_drops, link_random_losses (one series per link).

Groups (``--group``): ``class`` (the flows' group label, the default),
``cca`` or ``kind`` of each flow — one series per value, over the flows that
have it, whatever the study sweeps; otherwise a swept parameter (by full
dotted path, such as ``flows.0.cca``, or a unique suffix such as ``loss``)
— one series per value, the metric over all flows of the run. Swept
parameters other than x and the group also split series, and so do the
study and the backend when a directory holds several, so different
configurations are never averaged together; a swept parameter that each
series' flows already name (one flow's swept cca under ``--group cca``) is
left out of the labels, since no series meets two of its values.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from ccbench.analysis.metrics import METRICS, RunMetrics, pooled, upper_bound
from ccbench.analysis.stats import Spread, spread
from ccbench.analysis.study import Analysis, ConfigResult
from ccbench.errors import UsageError

FLOW_GROUPS = ("class", "cca", "kind")


def resolve_param(name: str, keys: Sequence[str], what: str) -> Optional[str]:
    """The swept key named by ``name`` (full path or unique dotted suffix)."""
    if name in keys:
        return name
    hits = [k for k in keys if k.endswith("." + name)]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise UsageError(f"{what} '{name}' is ambiguous (matches {', '.join(hits)})")
    return None


def parse_x(label: Any) -> tuple[Optional[float], str]:
    """A swept value as a number for an axis: (value, unit). Percentages stay
    in % ('1%' → 1.0); rates in bit/s, times in s, sizes in bytes."""
    if isinstance(label, (int, float)) and not isinstance(label, bool):
        return float(label), ""
    from ccbench.spec import units

    s = str(label)
    for parse, unit, scale in ((units.parse_percent, "%", 100.0), (units.parse_rate, "bit/s", 1.0),
                               (units.parse_time, "s", 1e-9), (units.parse_size, "B", 1.0)):
        try:
            return float(parse(s)) * scale, unit
        except Exception:
            continue
    try:
        return float(s), ""
    except ValueError:
        return None, ""


@dataclass
class Point:
    x_label: str
    x: Optional[float]
    spread: Spread
    run_ids: list[str]
    rtt_us: Optional[float] = None  # median over runs of the group's mean RTT (for models)
    config: Optional[dict] = None  # a run config at this point (mss, rate, ...)


@dataclass
class Series:
    label: str
    points: list[Point] = field(default_factory=list)
    bulk: bool = False  # every flow behind it is a bulk flow (models are drawn only for those)
    of: Optional[str] = None  # a model series: the label of the series it models


@dataclass
class SweepPlot:
    metric: str
    x_key: str
    x_unit: str
    numeric: bool
    unit: str
    title: str
    series: list[Series]
    models: list[Series] = field(default_factory=list)  # Mathis, Padhye per bulk series (loss sweeps, goodput)


def _flow_key(group: str) -> Callable[[Any], str]:
    if group == "class":
        return lambda f: f.group
    if group == "cca":
        return lambda f: f.cca or "?"
    if group == "kind":
        return lambda f: f.kind
    return lambda f: ""  # one pool: all flows (series named by the group parameter)


def _bulk_pools(rm: RunMetrics, key: Callable[[Any], str]) -> dict[str, bool]:
    """Pool name → whether every flow in it is a bulk flow."""
    out: dict[str, bool] = {}
    for f in rm.flows:
        name = key(f)
        out[name] = out.get(name, True) and f.kind == "bulk"
    return out


def _named_by_pools(configs: Sequence[ConfigResult], key: str, fkey: Callable[[Any], str]) -> bool:
    """Does every pool of flows (by ``fkey``) occur with one value of the swept ``key`` only?"""
    seen: dict[str, str] = {}
    for c in configs:
        value = str(c.params.get(key))
        for rm in c.runs:
            for f in rm.flows:
                if seen.setdefault(fkey(f), value) != value:
                    return False
    return True


def sweep_plot(analysis: Analysis, metric: str, x: str, group: str = "class",
               configs: Optional[Sequence[ConfigResult]] = None) -> SweepPlot:
    if metric not in METRICS:
        raise UsageError(f"--metric: unknown metric '{metric}' (allowed: {', '.join(METRICS)})")
    configs = list(configs if configs is not None else analysis.configs)
    keys = list(dict.fromkeys(k for c in configs for k in c.params))
    x_key = resolve_param(x, keys, "--x")
    if x_key is None:
        raise UsageError(f"--x: '{x}' is not a swept parameter (swept: {', '.join(keys) or 'none'})")
    # class, cca and kind name the flows' own label, CCA and kind even where a
    # swept key ends in them (flows.1.cca): that one is grouped by by its full name
    if group not in FLOW_GROUPS and resolve_param(group, keys, "--group") == x_key:
        raise UsageError(f"--group: '{group}' is the x axis already (--x {x}); group by another swept parameter "
                         f"or by one of {', '.join(FLOW_GROUPS)}")
    g_key = None if group in FLOW_GROUPS else resolve_param(group, [k for k in keys if k != x_key], "--group")
    if g_key is None and group not in FLOW_GROUPS:
        raise UsageError(f"--group: '{group}' is neither a swept parameter nor one of {', '.join(FLOW_GROUPS)}")
    m = METRICS[metric]
    attr, level, unit, label = m.attr, m.level, m.unit, m.label
    fkey = _flow_key(group if g_key is None else "all")
    other = [k for k in keys if k != x_key and k != g_key
             and len({str(c.params.get(k)) for c in configs}) > 1]
    if level == "class" and g_key is None:
        other = [k for k in other if not _named_by_pools(configs, k, fkey)]
    # results of several studies or backends in one directory are never pooled either
    origin = [a for a in ("study", "backend") if len({getattr(c, a) for c in configs}) > 1]

    cells: dict[tuple[str, str], dict] = {}
    for c in configs:
        xl = str(c.params.get(x_key, "–"))
        split = [f"{g_key.split('.')[-1]}={c.params.get(g_key)}"] if g_key else []
        split += [f"{k.split('.')[-1]}={c.params[k]}" for k in other if k in c.params]
        split += [str(getattr(c, a)) for a in origin]
        for rm in c.runs:
            if level == "run":
                per = {"": (rm.values().get(attr), None, False)}
            elif level == "link":  # a series per link
                per = {name: (rm.values().get(m.key(name)), None, False) for name in rm.links}
            else:
                bulk = _bulk_pools(rm, fkey)
                per = {name: (getattr(cm, attr), cm.rtt_mean_us, bulk[name]) for name, cm in pooled(rm, fkey).items()
                       if not (metric.startswith("rpc") and not cm.rpc_count)}
            for name, (v, rtt, is_bulk) in per.items():
                slabel = " · ".join([p for p in [name] + split if p]) or label
                cell = cells.setdefault((slabel, xl), {"values": [], "runs": [], "rtt": [], "config": rm.run.config,
                                                       "bulk": True})
                cell["values"].append(v)
                cell["runs"].append(rm.run_id)
                cell["bulk"] = cell["bulk"] and is_bulk
                if rtt is not None:
                    cell["rtt"].append(rtt)
    xs = list(dict.fromkeys(str(c.params.get(x_key, "–")) for c in configs))
    parsed = {xl: parse_x(xl) for xl in xs}
    numeric = all(v is not None for v, _ in parsed.values())
    x_unit = next((u for _, u in parsed.values() if u), "")
    if numeric:
        xs.sort(key=lambda xl: parsed[xl][0])
    series: dict[str, Series] = {}
    for (slabel, xl), cell in cells.items():
        series.setdefault(slabel, Series(slabel, bulk=True)).bulk &= cell["bulk"]
    for s in series.values():
        for xl in xs:
            cell = cells.get((s.label, xl))
            if cell is None:
                continue
            rtt = statistics.median(cell["rtt"]) if cell["rtt"] else None
            s.points.append(Point(xl, parsed[xl][0], spread(cell["values"], upper_bound(attr)), cell["runs"],
                                  rtt, cell["config"]))
    plot = SweepPlot(metric, x_key, x_unit, numeric, unit, f"{label} vs {x_key}", list(series.values()))
    if metric in ("goodput", "goodput_steady") and x_unit == "%" and x_key.endswith("loss"):
        plot.models = model_series(plot)
    return plot


def model_series(plot: SweepPlot) -> list[Series]:
    """Mathis and Padhye throughput (module models.py) for each plotted bulk
    series at each of its loss points, at *that series'* median measured mean
    RTT there and with its run's mss, min_rto, delayed ACKs and receive
    window, capped at the bottleneck rate. Series of RPC flows (or of a mix)
    get no model. Each model series names the series it belongs to (``of``)."""
    from ccbench.analysis.models import mathis_bps, padhye_bps, receive_window_segs

    out: list[Series] = []
    for s in plot.series:
        if not s.bulk:
            continue
        mathis = Series(f"Mathis model · {s.label}", of=s.label)
        padhye = Series(f"Padhye model · {s.label}", of=s.label)
        for pt in s.points:
            if not pt.rtt_us or not pt.x:
                continue
            rtt_s = pt.rtt_us / 1e6
            p = pt.x / 100.0
            cfg = pt.config or {}
            tcp = cfg.get("tcp") or {}
            mss = tcp.get("mss", 1448)
            cap = (cfg.get("bottleneck") or {}).get("rate_bps") or math.inf
            t0 = rtt_s + tcp.get("min_rto_ns", 200_000_000) / 1e9
            b = 2 if tcp.get("delayed_ack", "linux") != "off" else 1
            wmax = receive_window_segs(tcp) if tcp.get("rmem_bytes") else None
            m = mathis_bps(mss, rtt_s, p)
            d = padhye_bps(mss, rtt_s, p, t0_s=t0, b=b, wmax_segs=wmax)
            if m is not None:
                mathis.points.append(Point(pt.x_label, pt.x, spread([min(m, cap)]), [], pt.rtt_us))
            if d is not None:
                padhye.points.append(Point(pt.x_label, pt.x, spread([min(d, cap)]), [], pt.rtt_us))
        out += [m for m in (mathis, padhye) if m.points]
    return out
