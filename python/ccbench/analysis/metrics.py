"""Metrics of one run, per flow, per flow class and per run.

Every function here is pure (RunData in, numbers out). Definitions, in the
units of the column names (bits/s, bytes, µs):

Per flow (:class:`FlowMetrics`)
  goodput_bps        bytes delivered in order to the receiving application × 8
                     / active time (flow start to min(stop, end of run)); as
                     reported by the backend (flows table).
  goodput_steady_bps the same over the steady-state window ∩ the flow's active
                     time, from the cumulative delivered-bytes samples
                     (linearly interpolated between samples, 0 at the start);
                     in-order counts, so bytes held behind a loss at the
                     window's edges move it (see utilisation_steady).
  bytes              bytes delivered.
  retrans_segs, sent_segs; retrans_pct = 100 · retrans_segs / sent_segs.
  rtt_min/mean/p99   the backend's summary (docs/analysis.md "RTT statistics"): min =
                     the connection's smallest RTT as Linux's min-RTT filter takes it
                     (the newest segment each ACK delivered, the handshake included;
                     tcpi_min_rtt at the end of the run on linux and hosts); mean and
                     p99 over one raw sample per round trip.
  rtt_p50_us         median of the sampled smoothed RTT (srtt) while active.
  queue_delay_mean_us = rtt_mean − rtt_min;  queue_delay_p99_us = rtt_p99 − rtt_min
                     (RTT above the flow's own minimum: the queueing it saw).

Per class (:class:`ClassMetrics`; a class is the flows' group label, e.g.
"cubic bulk", "cubic rpc 10KB")
  goodput_sum_bps    Σ goodput of the class's flows (aggregate).
  goodput_mean_bps   mean per-flow goodput (and goodput_per_flow_bps, every flow).
  jfi                Jain's index over the class's per-flow goodput.
  retrans_pct        100 · Σretrans / Σsent; rtt_mean_us, rtt_p99_us: mean over
                     flows (as in the summary table).
  rpc_count; rpc_p50/p99/p999_us: percentiles of the completion time of every
                     completed RPC of the class's flows.

Percentiles use linear interpolation between closest ranks (numpy's default,
Hyndman & Fan type 7): the q-th percentile of sorted x₀..xₙ₋₁ sits at rank
(n − 1)·q/100.

Per run (:class:`RunMetrics`)
  utilisation        Σ bytes delivered by all flows × 8 / (bottleneck rate ×
                     run duration) — payload only, so a full link reads about
                     mss/(mss + header bytes), e.g. 0.965.
  utilisation_steady the same over the steady-state window [t0, t1), not
                     counting payload that crossed the link before t0: the
                     delivered-bytes samples count bytes *in order* (the
                     receiver's rcv_nxt on sim, the sender's bytes_acked on
                     linux), so after a loss the count stalls while the link
                     keeps carrying the flow's later data (held out of order
                     at the receiver) and jumps when the retransmission fills
                     the hole. A window that starts inside such a hole would
                     count the held bytes as its own and can read above 1
                     (seen: 1.0165 sim, 1.0144 linux, BBR at 100 Mbit/s). With
                     D(t) the in-order bytes of all flows and r = rate ×
                     mss/(mss + header bytes) the most payload the link can
                     carry per second, at least L = max(D(t0), max over sample
                     times s in (t0, t1] of D(s) − r·(s − t0)) bytes had crossed
                     the link by t0, so utilisation_steady = (D(t1) − L) × 8 /
                     (rate × (t1 − t0)) ≤ mss/(mss + header). L − D(t0) is
                     steady_held_bytes (0 when no interval delivers faster
                     than the link can carry). It can still read low by the
                     bytes held out of order at t1 / (rate × window), which
                     the samples cannot tell (docs/analysis.md).
  steady_held_bytes  L − D(t0) above.
  jfi                Jain's index (Σx)²/(n·Σx²) over the goodput of all flows.
  jfi_by_class       the same within each class.
  jfi_series         JFI over time: for each bin [k·b, (k+1)·b) (b = 1 s), the
                     JFI of the goodput in that bin of the bulk flows active
                     for the whole bin (bins with none are left out). In a
                     general topology each goodput is first divided by the
                     flow's max-min share among those flows on their paths at
                     the bin's start (shares.shares_at): a max-min allocation
                     reads 1 there as an equal split does on the dumbbell.
  convergence        per bulk flow that joins while another bulk flow runs:
                     the time from its start until the JFI of the bulk flows,
                     in 1 s bins counted from the join, is ≥ converge_jfi in
                     that bin and every later bin up to the next flow start or
                     stop (or the end of the run); None = never converged.
                     A join followed by the next start or stop within one
                     bin is not judged: nothing can be measured in it (flows
                     started a few ms apart are judged once, from the last).
  backlog_mean/max_bytes (and _pkts): over the bottleneck queue samples
                     (a network has no one bottleneck: None; each link's
                     are in the queue table).
  link_utilisation, link_backlog_mean_bytes, link_drops, link_random_losses
                     per queueing link of a general topology (key suffix
                     [directed link name]): bytes it sent on the wire × 8 /
                     (its rate × the time of its last sample), the mean of
                     its backlog samples, its drops and random losses over
                     the run. Headers count: a full link reads 1.
  drops, ecn_marks   at the bottleneck over the run (last cumulative sample);
                     in a network, summed over every queue. Packets lost to
                     a link's random `loss` are not drops.
  random_losses      the packets the bottleneck's random `loss` took over the
                     run (last cumulative sample; in a network, summed over
                     every queueing link); None in a store older than schema 3.
  timeouts, loss_probes, recoveries  the run's retransmission timeouts,
                     tail loss probes and entries into fast recovery over all
                     its connections (stats rto_count, tlp_count and
                     recoveries, counted alike by the simulator and the
                     kernel; None on a backend that has no such count).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import numpy as np

from ccbench.analysis.anomalies import Anomaly, detect
from ccbench.analysis.data import RunData
from ccbench.analysis.settings import AnalysisSettings
from ccbench.analysis.shares import shares_at
from ccbench.analysis.series import (
    cumulative_at, flow_stop, goodput_between, interval_rates, jain_index, percentile, steady_window, to_float,
)

__all__ = [
    "percentile", "jain_index", "cumulative_at", "goodput_between", "interval_rates", "steady_window", "flow_stop",
    "payload_ceiling", "delivered_in_window",
    "jfi_series", "convergence", "FlowMetrics", "ClassMetrics", "RunMetrics", "LinkMetrics", "Convergence",
    "flow_metrics", "class_metrics", "run_metrics", "link_metrics", "METRICS", "Metric", "ALL_FLOWS",
]


DEFAULT_MSS = 1448  # the study defaults (ccbench.spec.model), for runs without a config
DEFAULT_HEADER_BYTES = 52  # IPv4 20 + TCP 20 + timestamp option 12


def payload_ceiling(run: RunData) -> float:
    """The share of the bottleneck rate that payload can fill: mss / (mss +
    header bytes) from the run's config (0.9653 for 1448 + 52)."""
    tcp = (run.config or {}).get("tcp") or {}
    mss = float(tcp.get("mss") or DEFAULT_MSS)
    header = float(tcp.get("header_bytes") if tcp.get("header_bytes") is not None else DEFAULT_HEADER_BYTES)
    return mss / (mss + header)


def delivered_in_window(run: RunData, t0: float, t1: float, payload_bps: float) -> tuple[float, float]:
    """(bytes, held): the payload of all flows that crossed the bottleneck in
    [t0, t1] as far as the in-order delivered-bytes samples tell, and the bytes
    delivered in the window that must have crossed it before t0.

    With D(t) = Σ in-order delivered bytes and r = payload_bps / 8e6 (bytes/µs),
    L = max(D(t0), max over sample times s in (t0, t1] of D(s) − r·(s − t0))
    is a lower bound of the bytes that had crossed the link by t0 (no more
    than r·(s − t0) can cross after t0); bytes = D(t1) − L ≤ r·(t1 − t0),
    held = L − D(t0)."""
    flows = [(run.series.get(int(f["flow_id"])), float(f.get("start_us") or 0)) for f in run.flows]
    times = {float(t1)}
    for s, _ in flows:
        if s is not None and len(s.time_us):
            times.update(s.time_us[(s.time_us > t0) & (s.time_us <= t1)].tolist())
    ts = np.array(sorted(times), dtype=float)
    d = np.zeros(len(ts))
    d0 = 0.0
    for s, start in flows:
        d += cumulative_at(s, start, ts)
        d0 += float(cumulative_at(s, start, t0))
    r = payload_bps / 8e6
    lower = max(d0, float(np.max(d - r * (ts - t0))))
    return float(d[-1] - lower), lower - d0



# -- per flow ------------------------------------------------------------------


@dataclass
class FlowMetrics:
    run_id: str
    flow_id: int
    group: str
    cca: Optional[str]
    kind: str
    start_us: float
    stop_us: float
    bytes: Optional[int]
    goodput_bps: Optional[float]
    goodput_steady_bps: Optional[float]
    sent_segs: Optional[int]
    retrans_segs: Optional[int]
    retrans_pct: Optional[float]
    rtt_min_us: Optional[float]
    rtt_mean_us: Optional[float]
    rtt_p50_us: Optional[float]
    rtt_p99_us: Optional[float]
    queue_delay_mean_us: Optional[float]
    queue_delay_p99_us: Optional[float]
    srtt_mean_us: Optional[float] = None
    srtt_mean_steady_us: Optional[float] = None


def _srtt_mean(s: Any, t0: float, t1: float) -> Optional[float]:
    """Mean of the sampled srtt in [t0, t1] (0 = not measured yet: left out)."""
    if s is None or s.srtt_us is None or t1 <= t0:
        return None
    keep = (s.time_us >= t0) & (s.time_us <= t1) & np.isfinite(s.srtt_us) & (s.srtt_us > 0)
    return float(np.mean(s.srtt_us[keep])) if keep.any() else None


def flow_metrics(run: RunData, flow: dict, window: tuple[float, float]) -> FlowMetrics:
    fid = int(flow["flow_id"])
    s = run.series.get(fid)
    start = float(flow.get("start_us") or 0)
    stop = flow_stop(run, flow)
    t0, t1 = max(window[0], start), min(window[1], stop)
    steady = goodput_between(s, start, t0, t1) if t1 > t0 and s is not None else None
    sent, rtx = flow.get("sent_segs"), flow.get("retrans_segs")
    rmin, rmean, rp99 = (to_float(flow.get(k)) for k in ("rtt_min_us", "rtt_mean_us", "rtt_p99_us"))
    p50 = None
    if s is not None and s.srtt_us is not None:
        p50 = percentile(s.srtt_us[(s.time_us >= start) & (s.time_us <= stop) & (s.srtt_us > 0)], 50)
    return FlowMetrics(
        run_id=run.run_id, flow_id=fid, group=str(flow.get("group_name") or flow.get("cca")),
        cca=flow.get("cca"), kind=flow.get("kind") or "bulk", start_us=start, stop_us=stop,
        bytes=flow.get("bytes_delivered"), goodput_bps=to_float(flow.get("goodput_bps")), goodput_steady_bps=steady,
        sent_segs=sent, retrans_segs=rtx, retrans_pct=100.0 * rtx / sent if sent and rtx is not None else None,
        rtt_min_us=rmin, rtt_mean_us=rmean, rtt_p50_us=p50, rtt_p99_us=rp99,
        queue_delay_mean_us=rmean - rmin if rmean is not None and rmin is not None else None,
        queue_delay_p99_us=rp99 - rmin if rp99 is not None and rmin is not None else None,
        srtt_mean_us=_srtt_mean(s, start, stop), srtt_mean_steady_us=_srtt_mean(s, t0, t1),
    )


# -- per class -----------------------------------------------------------------

#: the pool of every flow of a run, beside the classes when a run has more than one
ALL_FLOWS = "all flows"


@dataclass
class ClassMetrics:
    group: str
    kind: str
    ccas: list[str]
    flows: int
    goodput_sum_bps: Optional[float]
    goodput_mean_bps: Optional[float]
    goodput_per_flow_bps: list[float]
    goodput_steady_mean_bps: Optional[float]
    jfi: Optional[float]
    retrans_pct: Optional[float]
    rtt_mean_us: Optional[float]
    rtt_p99_us: Optional[float]
    queue_delay_mean_us: Optional[float]
    rpc_count: int = 0
    rpc_p50_us: Optional[float] = None
    rpc_p99_us: Optional[float] = None
    rpc_p999_us: Optional[float] = None
    goodput_steady_sum_bps: Optional[float] = None
    goodput_steady_min_bps: Optional[float] = None
    goodput_steady_max_bps: Optional[float] = None
    jfi_steady: Optional[float] = None
    srtt_mean_us: Optional[float] = None
    srtt_mean_steady_us: Optional[float] = None


def _mean(xs: Sequence[Optional[float]]) -> Optional[float]:
    v = [x for x in xs if x is not None]
    return sum(v) / len(v) if v else None


def class_metrics(group: str, flows: Sequence[FlowMetrics], rpc_latencies_us: Sequence[float] = ()) -> ClassMetrics:
    gp = [f.goodput_bps for f in flows if f.goodput_bps is not None]
    steady = [f.goodput_steady_bps for f in flows]
    # steady sums, extremes and JFI only when every flow has a steady value (a flow
    # outside the window would otherwise vanish from them)
    st = [x for x in steady if x is not None] if steady and all(x is not None for x in steady) else []
    sent = sum(f.sent_segs or 0 for f in flows)
    rtx = sum(f.retrans_segs or 0 for f in flows)
    lat = [x for x in rpc_latencies_us if x is not None and not math.isnan(x)]
    kinds = sorted({f.kind for f in flows})
    return ClassMetrics(
        group=group, kind=kinds[0] if len(kinds) == 1 else "mixed",
        ccas=sorted({f.cca for f in flows if f.cca}), flows=len(flows),
        goodput_sum_bps=sum(gp) if gp else None, goodput_mean_bps=_mean(gp), goodput_per_flow_bps=gp,
        goodput_steady_mean_bps=_mean(steady),
        jfi=jain_index(gp) if gp else None,
        retrans_pct=100.0 * rtx / sent if sent else None,
        rtt_mean_us=_mean([f.rtt_mean_us for f in flows]), rtt_p99_us=_mean([f.rtt_p99_us for f in flows]),
        queue_delay_mean_us=_mean([f.queue_delay_mean_us for f in flows]),
        rpc_count=len(lat),
        rpc_p50_us=percentile(lat, 50), rpc_p99_us=percentile(lat, 99), rpc_p999_us=percentile(lat, 99.9),
        goodput_steady_sum_bps=sum(st) if st else None,
        goodput_steady_min_bps=min(st) if st else None, goodput_steady_max_bps=max(st) if st else None,
        jfi_steady=jain_index(st) if st else None,
        srtt_mean_us=_mean([f.srtt_mean_us for f in flows]),
        srtt_mean_steady_us=_mean([f.srtt_mean_steady_us for f in flows]),
    )


# -- JFI over time, convergence ------------------------------------------------------


def _active(run: RunData, flow: dict, t0: float, t1: float) -> bool:
    return float(flow.get("start_us") or 0) <= t0 and flow_stop(run, flow) >= t1


def _bulk(run: RunData) -> list[dict]:
    return [f for f in run.flows if (f.get("kind") or "bulk") == "bulk"]


def _bin_jfi(run: RunData, flows: Sequence[dict], t0: float, t1: float) -> Optional[float]:
    rates = [goodput_between(run.series.get(int(f["flow_id"])), float(f.get("start_us") or 0), t0, t1) or 0.0
             for f in flows]
    if not rates:
        return None
    # A general topology: each goodput over the flow's max-min share (Jain's
    # index of the allocation against the fair one), where the shares differ.
    fair = shares_at(run, [int(f["flow_id"]) for f in flows], t0)
    if fair:
        share = [fair.get(int(f["flow_id"])) for f in flows]
        if all(x is not None and 0 < x < math.inf for x in share):
            rates = [r / x for r, x in zip(rates, share)]
    return jain_index(rates)


def jfi_series(run: RunData, bin_us: int = 1_000_000) -> tuple[list[float], list[float]]:
    """(bin start times in µs, JFI) — see the module docstring."""
    times, values = [], []
    bulk = _bulk(run)
    k = 0
    while (k + 1) * bin_us <= run.duration_us:
        t0, t1 = k * bin_us, (k + 1) * bin_us
        k += 1
        active = [f for f in bulk if _active(run, f, t0, t1)]
        if not active:
            continue
        j = _bin_jfi(run, active, t0, t1)
        if j is not None:
            times.append(float(t0))
            values.append(j)
    return times, values


@dataclass
class Convergence:
    flow_id: int
    join_us: float
    epoch_end_us: float
    flows: list[int]  # bulk flows sharing the link in the epoch
    converged_after_us: Optional[float]  # None: not converged before the epoch ended
    bins: list[float] = field(default_factory=list)  # JFI per bin from the join


def convergence(run: RunData, threshold: float = 0.9, bin_us: int = 1_000_000) -> list[Convergence]:
    """Time to converge to fairness after each bulk flow joins (module docstring)."""
    bulk = _bulk(run)
    events = sorted({float(f.get("start_us") or 0) for f in bulk} | {flow_stop(run, f) for f in bulk}
                    | {float(run.duration_us)})
    out = []
    for f in sorted(bulk, key=lambda f: (f.get("start_us") or 0, f["flow_id"])):
        join = float(f.get("start_us") or 0)
        others = [g for g in bulk if g is not f and float(g.get("start_us") or 0) <= join < flow_stop(run, g)]
        if not others:
            continue
        end = min((e for e in events if e > join), default=float(run.duration_us))
        if end - join < bin_us - 1e-6:
            continue  # not one bin before the next start or stop: not judged
        sharing = [g for g in bulk if float(g.get("start_us") or 0) <= join and flow_stop(run, g) >= end]
        bins = []
        k = 0
        while join + (k + 1) * bin_us <= end + 1e-6:
            bins.append(_bin_jfi(run, sharing, join + k * bin_us, join + (k + 1) * bin_us))
            k += 1
        after = None
        if bins and bins[-1] is not None and bins[-1] >= threshold:
            k = len(bins) - 1
            while k > 0 and bins[k - 1] is not None and bins[k - 1] >= threshold:
                k -= 1
            after = float(k * bin_us)
        out.append(Convergence(int(f["flow_id"]), join, end, [int(g["flow_id"]) for g in sharing], after,
                               [b if b is not None else float("nan") for b in bins]))
    return out


# -- per link of a network ----------------------------------------------------


@dataclass
class LinkMetrics:
    """One queueing link of a general topology over the run, from its rows
    of the queue table (module docstring: link_*)."""

    utilisation: Optional[float]
    backlog_mean_bytes: Optional[float]
    drops: int
    ecn_marks: int
    random_losses: Optional[int] = None  # None: a store older than schema 3


def _last_count(q: dict[str, np.ndarray], column: str) -> Optional[int]:
    """A cumulative counter's value at the last sample; None when the store has no such column or values."""
    v = q.get(column)
    if v is None or not np.isfinite(v).any():
        return None
    return int(np.nanmax(v))


def link_metrics(run: RunData) -> dict[str, LinkMetrics]:
    """Directed link name → LinkMetrics, for a run on a general topology ({} on the dumbbell,
    whose bottleneck has the run-level keys)."""
    cfg = run.config or {}
    if "network" not in cfg:
        return {}
    rates = {ln["name"]: ln.get("rate_bps") for ln in cfg["network"].get("links", [])}
    out = {}
    for name, q in sorted(run.queue.items()):
        t = q["time_us"]
        if not len(t):
            continue
        util = None
        tx, rate = q.get("tx_bytes"), rates.get(name)
        if tx is not None and rate and t[-1] > 0 and np.isfinite(tx[-1]):
            util = float(tx[-1]) * 8e6 / (float(rate) * float(t[-1]))
        out[name] = LinkMetrics(util, float(np.nanmean(q["backlog_bytes"])), int(np.nanmax(q["drops"])),
                                int(np.nanmax(q["ecn_marks"])), _last_count(q, "random_losses"))
    return out


# -- per run -------------------------------------------------------------------


@dataclass
class RunMetrics:
    run: RunData
    window: tuple[float, float]
    flows: list[FlowMetrics]
    classes: dict[str, ClassMetrics]
    utilisation: Optional[float]
    utilisation_steady: Optional[float]
    jfi: Optional[float]
    jfi_by_class: dict[str, Optional[float]]
    jfi_times_us: list[float]
    jfi_values: list[float]
    convergence: list[Convergence]
    backlog_mean_bytes: Optional[float]
    backlog_max_bytes: Optional[float]
    backlog_mean_pkts: Optional[float]
    backlog_max_pkts: Optional[float]
    drops: Optional[int]
    ecn_marks: Optional[int]
    random_losses: Optional[int] = None
    anomalies: list[Anomaly] = field(default_factory=list)
    #: bytes delivered in order in the steady-state window that crossed the
    #: link before it (not counted in utilisation_steady; module docstring)
    steady_held_bytes: Optional[float] = None
    #: every flow as one class (None when the run has one class: then it is that class)
    all_flows: Optional[ClassMetrics] = None
    #: a general topology's queueing links by directed name ({} on the dumbbell)
    links: dict[str, LinkMetrics] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return self.run.run_id

    def pools(self) -> dict[str, ClassMetrics]:
        """The classes, and every flow together (ALL_FLOWS) when there are several."""
        return {**self.classes, **({ALL_FLOWS: self.all_flows} if self.all_flows is not None else {})}

    def values(self) -> dict[str, Optional[float]]:
        """The run's numbers by metric key, for statistics over repetitions:
        run-level keys ('jfi', 'utilisation', 'convergence_us' — mean time to
        converge, None unless every join converged —, 'converged' ...) and per class
        'goodput_mean_bps[<class>]' etc. (see METRICS), also for '[all flows]'
        when the run has several classes."""
        v: dict[str, Optional[float]] = {
            "jfi": self.jfi, "utilisation": self.utilisation, "utilisation_steady": self.utilisation_steady,
            "backlog_mean_bytes": self.backlog_mean_bytes, "drops": to_float(self.drops),
            "random_losses": to_float(self.random_losses),
            "timeouts": to_float(self.run.timeouts), "loss_probes": to_float(self.run.loss_probes),
            "recoveries": to_float(self.run.recoveries),
            "convergence_us": _mean([c.converged_after_us for c in self.convergence])
            if self.convergence and all(c.converged_after_us is not None for c in self.convergence) else None,
            # 1 when every join converged, 0 when one did not (the mean over runs is the fraction that did)
            "converged": (1.0 if all(c.converged_after_us is not None for c in self.convergence) else 0.0)
            if self.convergence else None,
        }
        for g, c in self.pools().items():
            for m in METRICS.values():
                if m.level == "class" and (c.rpc_count or not m.attr.startswith("rpc_")):
                    v[f"{m.attr}[{g}]"] = getattr(c, m.attr)
        for name, lm in self.links.items():
            v[f"link_utilisation[{name}]"] = lm.utilisation
            v[f"link_backlog_mean_bytes[{name}]"] = lm.backlog_mean_bytes
            v[f"link_drops[{name}]"] = float(lm.drops)
            v[f"link_random_losses[{name}]"] = to_float(lm.random_losses)
        return v


def _rpc_latencies(run: RunData, flows: Sequence[FlowMetrics]) -> list[float]:
    lat: list[float] = []
    for fm in flows:
        r = run.rpcs.get(fm.flow_id)
        if r is not None:
            lat.extend(r["latency_us"].tolist())
    return lat


def pooled(rm: "RunMetrics", key: Callable[[FlowMetrics], str]) -> dict[str, ClassMetrics]:
    """Class metrics of the run's flows pooled by ``key`` (e.g. by cca or kind)."""
    pools: dict[str, list[FlowMetrics]] = {}
    for f in rm.flows:
        pools.setdefault(key(f), []).append(f)
    return {name: class_metrics(name, fs, _rpc_latencies(rm.run, fs)) for name, fs in pools.items()}


def run_metrics(run: RunData, settings: AnalysisSettings = AnalysisSettings()) -> RunMetrics:
    window = steady_window(run, settings)
    fms = [flow_metrics(run, f, window) for f in sorted(run.flows, key=lambda f: f["flow_id"])]
    groups: dict[str, list[FlowMetrics]] = {}
    for fm in fms:
        groups.setdefault(fm.group, []).append(fm)
    classes = {g: class_metrics(g, members, _rpc_latencies(run, members)) for g, members in groups.items()}
    everyone = class_metrics(ALL_FLOWS, fms, _rpc_latencies(run, fms)) if len(classes) > 1 else None
    cap = run.bottleneck_bps
    util = util_steady = held = None
    if cap and run.duration_us > 0:
        total = sum(f.bytes or 0 for f in fms)
        util = total * 8e6 / (cap * run.duration_us)
        t0, t1 = window
        if t1 > t0:
            sb, held = delivered_in_window(run, t0, t1, cap * payload_ceiling(run))
            util_steady = sb * 8e6 / (cap * (t1 - t0))
    # time-series metrics need the series (load_runs(series=False) leaves them out)
    jt, jv = jfi_series(run, settings.jfi_bin_us) if run.series else ([], [])
    q = run.queue.get("bottleneck")
    bmean = bmax = pmean = pmax = None
    drops = marks = lost = None
    links = link_metrics(run)
    if q is not None and len(q["time_us"]):
        bmean, bmax = float(np.nanmean(q["backlog_bytes"])), float(np.nanmax(q["backlog_bytes"]))
        pmean, pmax = float(np.nanmean(q["backlog_pkts"])), float(np.nanmax(q["backlog_pkts"]))
        drops, marks = int(np.nanmax(q["drops"])), int(np.nanmax(q["ecn_marks"]))
        lost = _last_count(q, "random_losses")
    elif links:  # a network has no one bottleneck: every queue's drops, marks and random losses
        drops, marks = sum(lm.drops for lm in links.values()), sum(lm.ecn_marks for lm in links.values())
        counts = [lm.random_losses for lm in links.values()]
        lost = None if None in counts else sum(counts)
    gp = [f.goodput_bps for f in fms if f.goodput_bps is not None]
    rm = RunMetrics(
        run=run, window=window, flows=fms, classes=classes, utilisation=util, utilisation_steady=util_steady,
        jfi=jain_index(gp) if gp else None, jfi_by_class={g: c.jfi for g, c in classes.items()},
        jfi_times_us=jt, jfi_values=jv,
        convergence=convergence(run, settings.converge_jfi, settings.jfi_bin_us) if run.series else [],
        backlog_mean_bytes=bmean, backlog_max_bytes=bmax, backlog_mean_pkts=pmean, backlog_max_pkts=pmax,
        drops=drops, ecn_marks=marks, random_losses=lost, steady_held_bytes=held, all_flows=everyone,
        links=links,
    )
    rm.anomalies = detect(run, settings, window)
    return rm


# -- the metrics by name ---------------------------------------------------------------


@dataclass(frozen=True)
class Metric:
    """A metric as users name it (``ccbench plot --metric``, ``[[expect]]``, the API)."""

    name: str
    attr: str  # level "class": a ClassMetrics attribute; "run", "link": a RunMetrics.values() key (link: before [name])
    level: str  # "class" (per class of flows), "link" (per link of a general topology) or "run"
    unit: str  # "bps", "us", "%" or "" (see ccbench.console.value)
    label: str

    def key(self, pool: Optional[str] = None) -> str:
        """The key of this metric in RunMetrics.values() and ConfigResult.stats."""
        return self.attr if self.level == "run" else f"{self.attr}[{pool}]"


# Keys of metrics that cannot exceed 1 (Jain's index, a share of runs): their
# confidence interval is clipped there, as every metric's is at 0.
AT_MOST_ONE = frozenset({"jfi", "jfi_steady", "converged"})


def upper_bound(key: str) -> Optional[float]:
    """The most a metric key's value can be ('jfi[reno]' → 1.0), None if unbounded."""
    return 1.0 if key.split("[")[0] in AT_MOST_ONE else None


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("goodput", "goodput_mean_bps", "class", "bps", "goodput per flow"),
    Metric("goodput_sum", "goodput_sum_bps", "class", "bps", "aggregate goodput"),
    Metric("goodput_steady", "goodput_steady_mean_bps", "class", "bps", "steady-state goodput per flow"),
    Metric("goodput_steady_sum", "goodput_steady_sum_bps", "class", "bps", "aggregate steady-state goodput"),
    Metric("goodput_steady_min", "goodput_steady_min_bps", "class", "bps", "slowest flow's steady-state goodput"),
    Metric("goodput_steady_max", "goodput_steady_max_bps", "class", "bps", "fastest flow's steady-state goodput"),
    Metric("retrans", "retrans_pct", "class", "%", "retransmitted segments"),
    Metric("rtt", "rtt_mean_us", "class", "us", "mean RTT"),
    Metric("rtt_p99", "rtt_p99_us", "class", "us", "p99 RTT"),
    Metric("srtt", "srtt_mean_us", "class", "us", "mean sampled smoothed RTT"),
    Metric("srtt_steady", "srtt_mean_steady_us", "class", "us", "mean sampled smoothed RTT, steady state"),
    Metric("queue_delay", "queue_delay_mean_us", "class", "us", "queueing delay (RTT − min RTT)"),
    Metric("class_jfi", "jfi", "class", "", "Jain's fairness index within the class"),
    Metric("jfi_steady", "jfi_steady", "class", "", "Jain's fairness index of steady-state goodput"),
    Metric("rpc_p50", "rpc_p50_us", "class", "us", "RPC completion time p50"),
    Metric("rpc_p99", "rpc_p99_us", "class", "us", "RPC completion time p99"),
    Metric("rpc_p999", "rpc_p999_us", "class", "us", "RPC completion time p99.9"),
    Metric("jfi", "jfi", "run", "", "Jain's fairness index"),
    Metric("utilisation", "utilisation", "run", "", "link utilisation"),
    Metric("utilisation_steady", "utilisation_steady", "run", "", "link utilisation, steady state"),
    Metric("backlog", "backlog_mean_bytes", "run", "", "mean bottleneck backlog (bytes)"),
    Metric("drops", "drops", "run", "", "queue drops"),
    Metric("random_losses", "random_losses", "run", "", "packets lost to the link's random loss"),
    Metric("timeouts", "timeouts", "run", "", "retransmission timeouts"),
    Metric("loss_probes", "loss_probes", "run", "", "tail loss probes"),
    Metric("recoveries", "recoveries", "run", "", "entries into fast recovery"),
    Metric("convergence", "convergence_us", "run", "us", "time to converge to fairness"),
    Metric("converged", "converged", "run", "", "share of runs where every join converged"),
    Metric("link_utilisation", "link_utilisation", "link", "", "link utilisation (bytes on the wire)"),
    Metric("link_backlog", "link_backlog_mean_bytes", "link", "", "mean link backlog (bytes)"),
    Metric("link_drops", "link_drops", "link", "", "link queue drops"),
    Metric("link_random_losses", "link_random_losses", "link", "", "packets lost to the link's random loss"),
)}
