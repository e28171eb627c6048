"""Primitives over one run's flows and series, shared by the metrics
(metrics.py) and the anomaly detectors (anomalies.py): when a flow stops,
its cumulative delivered bytes at any time, goodput between two times, per
interval rates, the steady-state window, Jain's index and percentiles.

Percentiles use linear interpolation between closest ranks (numpy's
default, Hyndman & Fan type 7): the q-th percentile of sorted x₀..xₙ₋₁ sits
at rank (n − 1)·q/100.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Optional

import numpy as np

from ccbench.analysis.data import FlowSeries, RunData
from ccbench.analysis.settings import AnalysisSettings


def percentile(values: Iterable[float], q: float) -> Optional[float]:
    """q-th percentile (0–100), linear interpolation between closest ranks; None if empty."""
    xs = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    if xs.size == 0:
        return None
    return float(np.percentile(xs, q))


def to_float(x: Any) -> Optional[float]:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def flow_stop(run: RunData, flow: dict) -> float:
    stop = flow.get("stop_us")
    return float(run.duration_us if stop is None else min(stop, run.duration_us or stop))


def cumulative_at(series: Optional[FlowSeries], start_us: float, t_us: Any) -> np.ndarray:
    """Bytes delivered by time ``t_us`` (array or scalar): the cumulative
    samples linearly interpolated, 0 at and before the flow's start, the last
    sample's value after the last sample."""
    t = np.asarray(t_us, dtype=float)
    if series is None or len(series.time_us) == 0:
        return np.zeros_like(t)
    ts, ds = series.time_us, series.delivered_bytes
    if start_us < ts[0]:
        ts = np.concatenate(([start_us], ts))
        ds = np.concatenate(([0.0], ds))
    out = np.interp(t, ts, ds, left=0.0)
    return np.where(t <= start_us, 0.0, out)


def goodput_between(series: Optional[FlowSeries], start_us: float, t0_us: float, t1_us: float) -> Optional[float]:
    """Goodput in bits/s between two times, from the cumulative delivered bytes."""
    if t1_us <= t0_us:
        return None
    d = cumulative_at(series, start_us, [t0_us, t1_us])
    return float((d[1] - d[0]) * 8e6 / (t1_us - t0_us))


def interval_rates(series: Optional[FlowSeries], start_us: float) -> tuple[np.ndarray, np.ndarray]:
    """Per sample interval goodput: (end time of each interval, bits/s). The
    first interval runs from the flow's start to its first sample."""
    if series is None or len(series.time_us) == 0:
        return np.zeros(0), np.zeros(0)
    ts = np.concatenate(([start_us], series.time_us))
    ds = np.concatenate(([0.0], series.delivered_bytes))
    dt = np.diff(ts)
    keep = dt > 0
    rate = np.diff(ds)[keep] * 8e6 / dt[keep]
    return ts[1:][keep], rate


def steady_window(run: RunData, settings: AnalysisSettings) -> tuple[float, float]:
    """The steady-state window [t0, t1) in µs: t0 = settings.steady_after_us,
    or by default a quarter of the way from the last bulk flow's start to the
    end of the run; t1 = the end of the run."""
    end = float(run.duration_us)
    if settings.steady_after_us is not None:
        return float(settings.steady_after_us), end
    starts = [f.get("start_us") or 0 for f in run.flows if f.get("kind", "bulk") == "bulk"]
    last = float(max(starts, default=0))
    return last + (end - last) / 4.0, end


def jain_index(values: Iterable[float]) -> Optional[float]:
    """Jain's fairness index (Σx)² / (n·Σx²); None for no values or all zero."""
    xs = [float(v) for v in values]
    if not xs:
        return None
    sq = sum(x * x for x in xs)
    if sq == 0.0:
        return None
    return sum(xs) ** 2 / (len(xs) * sq)
