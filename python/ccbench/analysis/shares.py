"""Each flow's fair share of the network, interval by interval, for the
anomaly detectors (anomalies.py).

A flow's fair share in a sample interval is its max-min fair rate
(ccbench.spec.fairshare.max_min) among the flows active for the whole
interval, every one of them taken as greedy, over the links of the path it
had at the interval's start; capacities are the links' rates. Its
*limiting link* is where the water filling froze it: a link of its path
that the allocation fills and on which no flow gets more than it.

- The dumbbell: a flow crosses its sender's access link and the bottleneck,
  so with access links faster than the bottleneck's share every flow's
  share is C / n and its limiting link the bottleneck.
- A network: a flow crosses the links of its data path, which route
  events (``[[events]]``) and the path controller's moves change during
  the run; the events table says when, in the backends' own words
  ("path: <link> <link> ...; return_path: ...", a move "moved: path: ...").
- A flow with ``max_rate`` wants no more than it (fairshare.demands).

A run whose config says nothing of its links (runs stored without one)
falls back to one link, the bottleneck rate, crossed by every flow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ccbench.analysis.data import RunData
from ccbench.spec import fairshare

BOTTLENECK = "bottleneck"


@dataclass
class Shares:
    """Per flow id, per interval k (t_{k-1}, t_k] of the grid: the fair share
    (bits/s; NaN where the flow was not active for the whole interval) and
    the limiting link (None there)."""

    fair: dict[int, np.ndarray]
    limit: dict[int, list[Optional[str]]]
    #: per link, per interval: the aggregate goodput (bits/s) of the flows
    #: whose path crossed it at the interval's start
    load: dict[str, np.ndarray]
    capacity: dict[str, float]


def links_and_paths(run: RunData) -> tuple[dict[str, float], dict[int, tuple[str, ...]]]:
    """The rates (bits/s) of the run's links, and each flow's data path at the
    start (spec/fairshare.links_and_paths); a run stored without a config:
    the bottleneck, crossed by every flow."""
    if run.config and ("network" in run.config or "bottleneck" in run.config):
        rates, paths = fairshare.links_and_paths(run.config)
        capacity = {ln: float(r) for ln, r in rates.items() if r}
    else:
        capacity, paths = ({BOTTLENECK: float(run.bottleneck_bps)} if run.bottleneck_bps else {}), {}
    return capacity, {int(f["flow_id"]): tuple(paths.get(int(f["flow_id"]), (BOTTLENECK,))) for f in run.flows}


def demands(run: RunData) -> dict[int, float]:
    """The most each flow with ``max_rate`` can take (bits/s; on the links'
    scale, packets with their headers, as the capacities here)."""
    return {int(f): float(d) for f, d in fairshare.demands(run.config).items()} if run.config else {}


#: How each kind of event row that moves a flow words its new path: a
#: route event "path: ...", the controller's action and release rows
#: "moved: path: ..." (both backends).
MOVED = {"route": "path: ", "controller": "moved: path: "}


def route_changes(run: RunData) -> list[tuple[float, int, tuple[str, ...]]]:
    """(time µs, flow id, new data path) of every route event and every
    move of the path controller, in time order."""
    out = []
    for ev in run.events:
        detail, prefix = ev.get("detail") or "", MOVED.get(ev.get("kind"))
        if prefix is None or ev.get("flow_id") is None or not detail.startswith(prefix):
            continue
        names = detail[len(prefix):].split(";")[0].split()
        if names:
            out.append((float(ev["time_us"]), int(ev["flow_id"]), tuple(names)))
    return sorted(out, key=lambda e: e[0])


def limiting_links(capacity: dict[str, float], paths: dict[int, tuple[str, ...]],
                   rate: dict[int, float]) -> dict[int, Optional[str]]:
    """Each flow's limiting link under the max-min allocation ``rate``: the
    first link of its path that is full and where no flow gets more."""
    load: dict[str, float] = {}
    top: dict[str, float] = {}
    for f, p in paths.items():
        for ln in p:
            if ln in capacity:
                load[ln] = load.get(ln, 0.0) + rate[f]
                top[ln] = max(top.get(ln, 0.0), rate[f])
    out: dict[int, Optional[str]] = {}
    for f, p in paths.items():
        out[f] = next((ln for ln in p if ln in capacity and load[ln] >= capacity[ln] * (1 - 1e-9)
                       and rate[f] >= top[ln] * (1 - 1e-9)), None)
    return out


def fair_shares(run: RunData, grid: np.ndarray, active: dict[int, np.ndarray],
                rates: dict[int, np.ndarray]) -> Optional[Shares]:
    """The flows' fair shares and limiting links over ``grid``'s intervals,
    and the links' load; ``active[fid][k]``: the flow was active for the
    whole interval k; ``rates[fid][k]``: its goodput in it (bits/s, NaN
    where unknown). None when no link's rate is known."""
    capacity, paths = links_and_paths(run)
    if not capacity:
        return None
    want = demands(run)
    changes = route_changes(run)
    n = max(len(grid) - 1, 0)
    fair = {fid: np.full(n, np.nan) for fid in paths}
    limit: dict[int, list[Optional[str]]] = {fid: [None] * n for fid in paths}
    load = {ln: np.zeros(n) for ln in capacity}
    memo: dict[bytes, tuple[dict[int, float], dict[int, Optional[str]]]] = {}
    # the intervals between route changes, each with the paths it starts with
    bounds = sorted({0, n} | {int(np.searchsorted(grid[:n], t, side="left")) for t, _, _ in changes})
    c = 0
    for k0, k1 in zip(bounds, bounds[1:]):
        while c < len(changes) and changes[c][0] <= grid[k0]:
            _, fid, path = changes[c]
            if fid in paths:
                paths[fid] = path
            c += 1
        for ln in capacity:
            rows = [rates[fid][k0:k1] for fid, p in paths.items() if ln in p and fid in rates]
            if rows:
                load[ln][k0:k1] = np.nansum(np.vstack(rows), axis=0)
        fids = [fid for fid in paths if fid in active]
        if not fids:
            continue
        on_at = np.vstack([active[fid][k0:k1] for fid in fids]).T
        memo.clear()  # the paths changed: so do the allocations
        for k in range(k0, k1):
            key = on_at[k - k0].tobytes()
            if key not in memo:
                sharing = {fid: paths[fid] for fid, on in zip(fids, on_at[k - k0]) if on}
                rate = fairshare.max_min(capacity, sharing, {f: d for f, d in want.items() if f in sharing})
                memo[key] = (rate, limiting_links(capacity, sharing, rate))
            rate, lim = memo[key]
            for fid, r in rate.items():
                if np.isfinite(r):
                    fair[fid][k] = r
                    limit[fid][k] = lim[fid]
    return Shares(fair, limit, load, capacity)


def shares_at(run: RunData, flow_ids: list[int], t_us: float) -> Optional[dict[int, float]]:
    """The max-min fair shares (bits/s) of ``flow_ids`` alone, on the paths
    they have at ``t_us`` (route events and the controller's moves until
    then): what Jain's index of a general topology divides goodputs by
    (metrics.py). None on the dumbbell (every flow's share is equal there,
    so the plain index is the same) and where the links' rates are unknown."""
    if not run.config or "network" not in run.config:
        return None
    capacity, paths = links_and_paths(run)
    if not capacity:
        return None
    for t, fid, path in route_changes(run):
        if t > t_us:
            break
        if fid in paths:
            paths[fid] = path
    want = demands(run)
    sharing = {fid: paths[fid] for fid in flow_ids if fid in paths}
    return fairshare.max_min(capacity, sharing, {f: d for f, d in want.items() if f in sharing})
