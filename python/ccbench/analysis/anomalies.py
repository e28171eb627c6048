"""Anomalies of one run: collapse, starvation, no steady state.

Definitions (intervals are the sample intervals of the run, (t_{k-1}, t_k]
with t_k = k · sample interval; a flow's fair share in an interval and its
limiting link are from shares.py: its max-min fair rate among the flows of
any kind active for the whole interval, over the links of its path — on
the dumbbell C / n_k with C the bottleneck rate, n_k those flows, and the
bottleneck its limiting link while the access links are faster):

collapse
  A bulk flow's goodput in an interval (from its cumulative delivered bytes)
  is below ``collapse_fraction`` × its fair share while its limiting link is
  busy (the aggregate goodput in the interval of the flows crossing it ≥
  ``busy_fraction`` × its rate), and this holds for consecutive intervals
  adding up to at least ``collapse_min``. That is the BBR collapse of
  netdev 2.2: one flow stays near nothing while the others fill the link.
  Each maximal stretch is one :class:`Anomaly`.
starvation
  A bulk flow whose goodput over its whole active time is below
  ``starve_fraction`` × the mean of its fair share over the intervals it was
  active; an RPC flow active for at least ``collapse_min`` that completed
  no RPC.
not steady
  The steady-state window is shorter than two sample intervals (the run
  ended before it), or a bulk flow active over the whole window has a
  goodput in the window's second half that differs from its first half by
  more than ``steady_tolerance`` × the larger of the two.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ccbench import console
from ccbench.analysis.data import RunData
from ccbench.analysis.series import cumulative_at, flow_stop, goodput_between, steady_window
from ccbench.analysis.settings import AnalysisSettings
from ccbench.analysis.shares import Shares, fair_shares

KINDS = ("collapse", "starvation", "not steady")


@dataclass
class Anomaly:
    kind: str  # one of KINDS
    run_id: str
    flow_id: Optional[int]
    start_us: Optional[float]
    end_us: Optional[float]
    reason: str  # one line, for people

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def interval_grid(run: RunData) -> np.ndarray:
    """Interval boundaries t_0 = 0 < t_1 < ... (µs): multiples of the sample
    interval up to the run's duration, or every sample time seen."""
    if run.sample_interval_us and run.duration_us:
        n = int(run.duration_us // run.sample_interval_us)
        return np.arange(n + 1, dtype=float) * run.sample_interval_us
    ts = sorted({0.0} | {float(t) for s in run.series.values() for t in s.time_us})
    return np.asarray(ts, dtype=float)


def _interval_table(run: RunData):
    """grid, per-flow per-interval rates (bits/s) and activity."""
    grid = interval_grid(run)
    dt = np.diff(grid)
    rates, active = {}, {}
    for f in run.flows:
        fid = int(f["flow_id"])
        start = float(f.get("start_us") or 0)
        d = cumulative_at(run.series.get(fid), start, grid)
        rates[fid] = np.diff(d) * 8e6 / np.where(dt > 0, dt, np.nan)
        active[fid] = (start <= grid[:-1]) & (flow_stop(run, f) >= grid[1:])
    return grid, rates, active


def _shares(run: RunData) -> tuple[np.ndarray, dict[int, np.ndarray], dict[int, np.ndarray], Optional[Shares]]:
    grid, rates, active = _interval_table(run)
    return grid, rates, active, fair_shares(run, grid, active, rates) if len(grid) >= 2 else None


def collapses(run: RunData, settings: AnalysisSettings, table: Optional[tuple] = None) -> list[Anomaly]:
    """``table``: _shares(run) when the caller has it."""
    if not run.flows:
        return []
    grid, rates, active, sh = table or _shares(run)
    if sh is None:
        return []
    out = []
    for f in run.flows:
        if (f.get("kind") or "bulk") != "bulk":
            continue
        fid = int(f["flow_id"])
        fair = sh.fair[fid]
        busy = np.array([ln is not None and sh.load[ln][k] >= settings.busy_fraction * sh.capacity[ln]
                         for k, ln in enumerate(sh.limit[fid])], dtype=bool)
        with np.errstate(invalid="ignore"):
            low = active[fid] & busy & (rates[fid] < settings.collapse_fraction * fair)
        k = 0
        n = len(low)
        while k < n:
            if not low[k]:
                k += 1
                continue
            j = k
            while j < n and low[j]:
                j += 1
            t0, t1 = grid[k], grid[j]
            if t1 - t0 >= settings.collapse_min_us:
                share = float(np.nanmean(rates[fid][k:j] / fair[k:j]))
                links = sorted({sh.limit[fid][i] for i in range(k, j)} - {None})
                where = "the link" if links == ["bottleneck"] else f"its bottleneck ({', '.join(links)})"
                out.append(Anomaly(
                    "collapse", run.run_id, fid, float(t0), float(t1),
                    f"flow {fid} ({f.get('group_name')}) at {100 * share:.1f}% of its fair share for "
                    f"{(t1 - t0) / 1e6:.1f} s ({t0 / 1e6:.1f}–{t1 / 1e6:.1f} s) while {where} was busy "
                    f"(threshold {100 * settings.collapse_fraction:g}% for {settings.collapse_min_us / 1e6:g} s)",
                ))
            k = j
    return out


def starvation(run: RunData, settings: AnalysisSettings, table: Optional[tuple] = None) -> list[Anomaly]:
    """``table``: _shares(run) when the caller has it."""
    out = []
    sh = active = None
    for f in run.flows:
        fid = int(f["flow_id"])
        start, stop = float(f.get("start_us") or 0), flow_stop(run, f)
        if stop <= start:
            continue
        if (f.get("kind") or "bulk") == "rpc":
            if stop - start >= settings.collapse_min_us and len(run.rpcs.get(fid, {}).get("latency_us", [])) == 0:
                out.append(Anomaly("starvation", run.run_id, fid, start, stop,
                                   f"flow {fid} ({f.get('group_name')}) completed no RPC in "
                                   f"{(stop - start) / 1e6:.1f} s"))
            continue
        if active is None:
            _, _, active, sh = table or _shares(run)
        if sh is None:
            break
        shares = sh.fair[fid][active[fid]]
        shares = shares[np.isfinite(shares)]
        if not len(shares):
            continue
        fair = float(np.mean(shares))
        gp = f.get("goodput_bps")
        if gp is not None and gp < settings.starve_fraction * fair:
            out.append(Anomaly("starvation", run.run_id, fid, start, stop,
                               f"flow {fid} ({f.get('group_name')}) got {console.rate(gp, short=True)}, below "
                               f"{100 * settings.starve_fraction:g}% of its fair share ({console.rate(fair, short=True)})"))
    return out


def not_steady(run: RunData, settings: AnalysisSettings, window: tuple[float, float]) -> list[Anomaly]:
    t0, t1 = window
    interval = run.sample_interval_us or 0
    if t1 - t0 < max(2 * interval, 1):
        return [Anomaly("not steady", run.run_id, None, t0, t1,
                        f"the steady-state window ({t0 / 1e6:.1f} s to the end at {t1 / 1e6:.1f} s) is empty")]
    mid = (t0 + t1) / 2
    if interval:  # halves on sample times, so no interpolation is involved
        mid = t0 + round((mid - t0) / interval) * interval
    out = []
    for f in run.flows:
        if (f.get("kind") or "bulk") != "bulk":
            continue
        start = float(f.get("start_us") or 0)
        if start > t0 or flow_stop(run, f) < t1:
            continue
        s = run.series.get(int(f["flow_id"]))
        g1, g2 = goodput_between(s, start, t0, mid), goodput_between(s, start, mid, t1)
        if g1 is None or g2 is None:
            continue
        top = max(g1, g2)
        if top > 0 and abs(g2 - g1) > settings.steady_tolerance * top:
            out.append(Anomaly("not steady", run.run_id, int(f["flow_id"]), t0, t1,
                               f"flow {f['flow_id']} ({f.get('group_name')}) went from {console.rate(g1, short=True)} to {console.rate(g2, short=True)} "
                               f"between the halves of the steady-state window ({t0 / 1e6:.1f}–{t1 / 1e6:.1f} s)"))
    return out


def detect(run: RunData, settings: AnalysisSettings,
           window: Optional[tuple[float, float]] = None) -> list[Anomaly]:
    """Every anomaly of a run (collapse, starvation, not steady); ``window`` is
    the steady-state window (default: series.steady_window)."""
    window = window if window is not None else steady_window(run, settings)
    table = _shares(run) if run.flows else None
    return collapses(run, settings, table) + starvation(run, settings, table) + not_steady(run, settings, window)
