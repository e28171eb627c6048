"""Max-min fair shares of a network's flows, computed analytically.

    max_min({"l1": 100, "l2": 60}, {"long": ["l1", "l2"], "a": ["l1"], "b": ["l2"]})
    # {"long": 30.0, "a": 70.0, "b": 30.0}

Water filling: every flow's rate rises at the same pace until some link is
full; the flows crossing it are frozen at their rate, and the rest keep
rising over the capacity left. A flow's demand is unlimited (a bulk flow)
unless it has one (``demand``: a flow with ``max_rate`` can take no more),
and a flow that reaches its demand is frozen there. :func:`shares` applies
it to a resolved run config: the capacity of a directed link is its payload
ceiling (rate × mss / (mss + header bytes), what goodput can reach with
full-size segments), each flow's links are its data path (a dumbbell: its
access link and the bottleneck), and a flow's ``max_rate`` its demand.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Hashable, Mapping, Optional, Sequence


def max_min(capacity: Mapping[Hashable, float], paths: Mapping[Hashable, Sequence[Hashable]],
            demand: Optional[Mapping[Hashable, float]] = None) -> dict:
    """The max-min fair rate of each flow (same unit as ``capacity``).

    ``paths`` maps a flow to the links it crosses; a link missing from
    ``capacity`` does not limit; ``demand`` maps a flow to the most it can
    take (absent: unlimited). Exact (fractions) inside, floats out.
    """
    left = {k: Fraction(v) for k, v in capacity.items()}
    want = {f: Fraction(d) for f, d in (demand or {}).items() if f in paths}
    active = {f: [ln for ln in p if ln in left] for f, p in paths.items()}
    rate = {f: Fraction(0) for f in paths}
    # a flow crossing no limiting link and wanting no less than everything is unbounded
    frozen = {f for f, p in active.items() if not p and f not in want}
    while len(frozen) < len(active):
        users = {ln: [f for f in active if f not in frozen and ln in active[f]] for ln in left}
        # the smallest equal increment that fills some link or meets some flow's demand
        inc = min([left[ln] / len(fs) for ln, fs in users.items() if fs]
                  + [want[f] - rate[f] for f in want if f not in frozen])
        full = [ln for ln, fs in users.items() if fs and left[ln] / len(fs) == inc]
        for f in active:
            if f not in frozen:
                rate[f] += inc
        for ln, fs in users.items():
            left[ln] -= inc * len(fs)
        for ln in full:
            frozen.update(users[ln])
        frozen.update(f for f in want if rate[f] >= want[f])
    return {f: (float(rate[f]) if active[f] or f in want else float("inf")) for f in paths}


def links_and_paths(config: dict) -> tuple[dict[str, int], dict[int, list[str]]]:
    """A resolved run config's directed links with their rates (bit/s), and
    each flow's data path by flow id (a dumbbell: its access link and the
    bottleneck)."""
    if "network" in config:
        rates = {ln["name"]: ln["rate_bps"] for ln in config["network"]["links"]}
        paths = {f["id"]: list(f["path"]) for f in config["flows"]}
    else:
        # (a config stored with a run has every key; the analysis also reads partial ones)
        rates = {"bottleneck": config["bottleneck"]["rate_bps"]}
        rates.update({f"access{i}": s["rate_bps"] for i, s in enumerate(config.get("senders", []))})
        paths = {f["id"]: [f"access{f['sender']}", "bottleneck"] for f in config.get("flows", [])}
    return rates, paths


def demands(config: dict) -> dict[int, int]:
    """Flow id → its ``max_rate`` (bit/s), for the flows that have one: the
    most such a flow can take (the kernel's pacing cap, on its packets)."""
    return {f["id"]: f["max_rate_bps"] for f in config.get("flows", []) if f.get("max_rate_bps")}


def shares(config: dict) -> dict[int, float]:
    """Flow id → its max-min fair goodput (bit/s) in a resolved run config."""
    tcp = config["tcp"]
    payload = Fraction(tcp["mss"], tcp["mss"] + tcp["header_bytes"])
    rates, paths = links_and_paths(config)
    return max_min({ln: r * payload for ln, r in rates.items()}, paths,
                   {f: d * payload for f, d in demands(config).items()})
