"""Metrics, statistics, anomalies and models against hand-computed values,
on synthetic runs (no simulator needed)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ccbench.analysis.anomalies import collapses, detect, not_steady, starvation
from ccbench.analysis.data import RunData, make_series
from ccbench.analysis.metrics import (
    class_metrics, convergence, cumulative_at, flow_metrics, goodput_between, interval_rates, jfi_series,
    percentile, run_metrics, steady_window,
)
from ccbench.analysis.models import mathis_bps, padhye_bps
from ccbench.analysis.settings import AnalysisSettings, from_study_text
from ccbench.analysis.stats import mean_ci, outliers, spread, t_quantile
from ccbench.analysis.study import analyze
from ccbench.errors import UsageError

M = 1e6
S = 1_000_000  # µs


def synthetic_run(rates: dict[int, list[float]], *, interval_us: int = 100_000, cap_bps: float = 100 * M,
                  starts: dict[int, int] | None = None, kinds: dict[int, str] | None = None,
                  run_id: str = "r0", config_id: str = "c0", params: dict | None = None, rep: int = 0,
                  srtt_us: float = 20_000.0) -> RunData:
    """A run whose flow f delivers rates[f][k] bits/s in sample interval k
    ((k·interval, (k+1)·interval]); flows start at 0 unless told."""
    starts = starts or {}
    kinds = kinds or {}
    n = max(len(r) for r in rates.values())
    duration = n * interval_us
    flows, series = [], {}
    for fid, r in rates.items():
        start = starts.get(fid, 0)
        t, d, total = [], [], 0.0
        for k, rate in enumerate(r):
            t_end = (k + 1) * interval_us
            if t_end <= start:
                continue
            total += rate * (t_end - max(k * interval_us, start)) / 8e6
            t.append(t_end)
            d.append(total)
        series[fid] = make_series(t, d, srtt_us=[srtt_us] * len(t), cwnd_bytes=[10_000] * len(t))
        flows.append({"flow_id": fid, "group_name": f"g{fid}", "cca": "reno", "kind": kinds.get(fid, "bulk"),
                      "start_us": start, "stop_us": duration, "bytes_delivered": int(total),
                      "goodput_bps": total * 8e6 / (duration - start), "sent_segs": 100, "retrans_segs": 5,
                      "rtt_min_us": 20_000.0, "rtt_mean_us": 25_000.0, "rtt_p99_us": 40_000.0})
    return RunData(run_id=run_id, config_id=config_id, params=params or {}, duration_us=duration,
                   bottleneck_bps=cap_bps, flows=flows, series=series, sample_interval_us=interval_us,
                   study="s", backend="sim", repetition=rep)


def per_second(*values: float, per: int = 10) -> list[float]:
    """Each value held for one second of 100 ms intervals."""
    return [v for v in values for _ in range(per)]


# -- percentiles, goodput ---------------------------------------------------------------


def test_percentile_by_hand():
    assert percentile([1, 2, 3, 4], 50) == pytest.approx(2.5)
    assert percentile([1, 2, 3, 4], 99) == pytest.approx(3.97)  # rank 3·0.99 = 2.97 → 3 + 0.97·(4 − 3)
    assert percentile([4, 1, 3, 2], 0) == 1 and percentile([4, 1, 3, 2], 100) == 4
    assert percentile([7], 99.9) == 7
    assert percentile([], 50) is None
    lat = list(range(1, 1001))  # 1..1000
    assert percentile(lat, 99.9) == pytest.approx(999.001)  # rank 999·0.999 = 998.001


def test_goodput_from_cumulative_samples():
    s = make_series([100_000, 200_000, 300_000], [1000, 3000, 6000])
    # starts at 50 ms: 0 bytes there, 1000 B at 100 ms
    assert cumulative_at(s, 50_000, 75_000) == pytest.approx(500)
    assert cumulative_at(s, 50_000, 10_000) == 0
    assert cumulative_at(s, 50_000, 900_000) == 6000  # held after the last sample
    assert goodput_between(s, 50_000, 100_000, 300_000) == pytest.approx(5000 * 8 / 0.2)
    t, r = interval_rates(s, 50_000)
    assert t.tolist() == [100_000, 200_000, 300_000]
    assert r.tolist() == pytest.approx([1000 * 8 / 0.05, 2000 * 8 / 0.1, 3000 * 8 / 0.1])
    assert goodput_between(s, 0, 5, 5) is None


def test_flow_and_class_metrics():
    run = synthetic_run({0: per_second(10 * M, 10 * M), 1: per_second(30 * M, 30 * M)})
    run.series[0].srtt_us = np.array([20_000.0 + 1000 * k for k in range(20)])
    window = (1 * S, 2 * S)
    f0 = flow_metrics(run, run.flows[0], window)
    assert f0.goodput_steady_bps == pytest.approx(10 * M)
    assert f0.retrans_pct == pytest.approx(5.0)
    assert f0.queue_delay_mean_us == pytest.approx(5000) and f0.queue_delay_p99_us == pytest.approx(20_000)
    assert f0.rtt_p50_us == pytest.approx(29_500)  # median of 20000..39000 step 1000
    f1 = flow_metrics(run, run.flows[1], window)
    c = class_metrics("both", [f0, f1], rpc_latencies_us=list(range(1, 101)))
    assert c.goodput_sum_bps == pytest.approx(40 * M) and c.goodput_mean_bps == pytest.approx(20 * M)
    assert c.jfi == pytest.approx(40 ** 2 / (2 * (100 + 900)))  # 0.8
    assert c.retrans_pct == pytest.approx(5.0)
    assert (c.rpc_count, c.rpc_p50_us, c.rpc_p99_us) == (100, pytest.approx(50.5), pytest.approx(99.01))


def test_steady_window_default_and_set():
    run = synthetic_run({0: per_second(1, 1, 1, 1, 1, 1, 1, 1, 1, 1), 1: per_second(*[1] * 10)}, starts={1: 2 * S})
    # last bulk start 2 s, end 10 s: a quarter of the way = 4 s
    assert steady_window(run, AnalysisSettings()) == (4 * S, 10 * S)
    assert steady_window(run, AnalysisSettings(steady_after_us=7 * S)) == (7 * S, 10 * S)


def test_utilisation_by_hand():
    run = synthetic_run({0: per_second(40 * M, 40 * M, 40 * M, 40 * M), 1: per_second(20 * M, 20 * M, 50 * M, 50 * M)})
    rm = run_metrics(run, AnalysisSettings(steady_after_us=2 * S))
    assert rm.utilisation == pytest.approx((160 + 140) / 400)
    assert rm.utilisation_steady == pytest.approx(90 / 100)
    assert rm.jfi == pytest.approx((40 + 35) ** 2 / (2 * (40 ** 2 + 35 ** 2)))


CEILING = 1448 / (1448 + 52)  # payload share of a full 1500-byte packet


def test_steady_utilisation_does_not_count_bytes_held_behind_a_hole():
    """A full link (payload at CEILING × rate throughout), but flow 0 loses a
    packet just before the window: its in-order count stalls for 100 ms while
    the link keeps carrying its data (held out of order at the receiver), then
    jumps when the retransmission fills the hole. The window [2 s, 3 s) then
    sees 50 ms too much payload: naively 1.05 × 0.965 = 1.014 > 1. The bytes
    delivered beyond what the link can carry after 2 s crossed it before 2 s,
    so they are not the window's."""
    full = CEILING * 100 * M
    f0 = [full / 2] * 30
    f0[19], f0[20] = 0.0, full  # stalled in (1.9, 2.0], released in (2.0, 2.1]
    run = synthetic_run({0: f0, 1: [full / 2] * 30})
    run.config = {"tcp": {"mss": 1448, "header_bytes": 52}}
    rm = run_metrics(run, AnalysisSettings(steady_after_us=2 * S))
    naive = (cumulative_at(run.series[0], 0, 3 * S) - cumulative_at(run.series[0], 0, 2 * S)
             + cumulative_at(run.series[1], 0, 3 * S) - cumulative_at(run.series[1], 0, 2 * S)) * 8 / (100 * M)
    assert naive == pytest.approx(1.05 * CEILING) and naive > 1  # the old definition
    assert rm.utilisation_steady == pytest.approx(CEILING)
    assert rm.steady_held_bytes == pytest.approx(0.1 * full / 2 / 8)  # 100 ms of flow 0's half
    # whole run: nothing was held before the run started
    assert rm.utilisation == pytest.approx(CEILING, rel=1e-6)
    # the same hole inside the window (stall and release both in it) changes nothing
    g0 = [full / 2] * 30
    g0[24], g0[25] = 0.0, full
    run2 = synthetic_run({0: g0, 1: [full / 2] * 30})
    rm2 = run_metrics(run2, AnalysisSettings(steady_after_us=2 * S))  # no config: mss 1448, header 52
    assert rm2.utilisation_steady == pytest.approx(CEILING) and rm2.steady_held_bytes == pytest.approx(0, abs=1e-3)


def test_steady_utilisation_is_not_lowered_by_a_draining_queue():
    """A queue that drains during the window does not let the link carry more
    than its rate: deliveries at the ceiling stay at the ceiling, and a link
    below the ceiling is not corrected."""
    full = CEILING * 100 * M
    run = synthetic_run({0: [full] * 20 + [0.8 * full] * 10})
    rm = run_metrics(run, AnalysisSettings(steady_after_us=1 * S))
    assert rm.utilisation_steady == pytest.approx((10 * CEILING + 10 * 0.8 * CEILING) / 20)
    assert rm.steady_held_bytes == pytest.approx(0, abs=1e-3)

# -- JFI over time, convergence --------------------------------------------------------------


def joining_run():
    """Flow 0 alone for 1 s at 10 Mbit/s; flow 1 joins at 1 s: 5 then 10 Mbit/s."""
    return synthetic_run({0: per_second(10 * M, 10 * M, 10 * M, 10 * M), 1: per_second(0, 5 * M, 10 * M, 10 * M)},
                         starts={1: 1 * S})


def test_jfi_over_time_by_hand():
    t, j = jfi_series(joining_run())
    assert t == [0, 1 * S, 2 * S, 3 * S]
    # [0,1): flow 0 alone → 1; [1,2): (10+5)²/(2·(100+25)) = 0.9; then equal → 1
    assert j == pytest.approx([1.0, 0.9, 1.0, 1.0])


def test_convergence_time_by_hand():
    (c,) = convergence(joining_run(), threshold=0.95)
    assert (c.flow_id, c.join_us, c.epoch_end_us, c.flows) == (1, 1 * S, 4 * S, [0, 1])
    assert c.bins == pytest.approx([0.9, 1.0, 1.0])
    assert c.converged_after_us == 1 * S  # the first bin from which every bin is ≥ 0.95
    (c,) = convergence(joining_run(), threshold=0.9)
    assert c.converged_after_us == 0
    # unfair to the end: 10 vs 2 Mbit/s → JFI 144/208 = 0.69 in every bin: never converged
    run = synthetic_run({0: per_second(10 * M, 10 * M, 10 * M), 1: per_second(0, 2 * M, 2 * M)}, starts={1: 1 * S})
    (c,) = convergence(run, threshold=0.9)
    assert c.converged_after_us is None and c.bins == pytest.approx([144 / 208, 144 / 208])
    # a flow that starts alone is not a join
    assert convergence(synthetic_run({0: per_second(1 * M, 1 * M)})) == []


def test_joins_a_few_ms_apart_are_judged_once_from_the_last():
    # three flows start 10 ms apart (as with start_jitter): the first two
    # joins' epochs are 10 ms, shorter than a bin, and are not judged; the
    # last one's runs to the end and converges in its first bin
    rates = {f: per_second(*[10 * M] * 4) for f in range(3)}
    run = synthetic_run(rates, starts={1: 10_000, 2: 20_000})
    (c,) = convergence(run, threshold=0.9)
    assert (c.flow_id, c.join_us, c.flows, c.converged_after_us) == (2, 20_000, [0, 1, 2], 0)
    assert run_metrics(run).values()["converged"] == 1.0


# -- anomalies ------------------------------------------------------------------------------


def collapse_run(low_seconds: int, other_rate: float = 92 * M):
    """Two bulk flows on 100 Mbit/s, 10 s: 48/48 Mbit/s except for low_seconds
    from 3 s where flow 1 gets 4 Mbit/s (below 10 % of 50) and flow 0 other_rate."""
    f0 = per_second(*([48 * M] * 3 + [other_rate] * low_seconds + [48 * M] * (7 - low_seconds)))
    f1 = per_second(*([48 * M] * 3 + [4 * M] * low_seconds + [48 * M] * (7 - low_seconds)))
    return synthetic_run({0: f0, 1: f1})


def test_collapse_detected():
    (a,) = collapses(collapse_run(3), AnalysisSettings())
    assert (a.kind, a.flow_id) == ("collapse", 1)
    assert (a.start_us, a.end_us) == (3 * S, 6 * S)
    assert "8.0% of its fair share" in a.reason  # 4 of 50 Mbit/s


def test_no_collapse_when_short_or_link_idle_or_high_enough():
    s = AnalysisSettings()
    assert collapses(collapse_run(1), s) == []  # 1 s < collapse_min 2 s
    assert collapses(collapse_run(3, other_rate=40 * M), s) == []  # aggregate 44 < 80 Mbit/s: link not busy
    assert collapses(collapse_run(3), AnalysisSettings(collapse_fraction=0.05)) == []  # 4 ≥ 2.5 Mbit/s
    assert len(collapses(collapse_run(3), AnalysisSettings(collapse_min_us=3 * S))) == 1  # exactly 3 s counts
    steady = synthetic_run({0: per_second(*[50 * M] * 10), 1: per_second(*[48 * M] * 10)})
    assert detect(steady, AnalysisSettings()) == []


def test_collapse_ignores_rpc_flows():
    run = collapse_run(3)
    run.flows[1]["kind"] = "rpc"
    assert collapses(run, AnalysisSettings()) == []


def parking_lot(rates: dict[int, list[float]], *, events: list[dict] | None = None, **kw) -> RunData:
    """A synthetic run on two 100 Mbit/s links in a row: flow 0 crosses both
    (l1, l2), flow 1 only l1, flow 2 only l2 (max-min: 50 Mbit/s each)."""
    run = synthetic_run(rates, cap_bps=None, **kw)
    links = [{"name": n, "rate_bps": r} for n, r in
             [("l1", 100 * M), ("l2", 100 * M), ("alt", 100 * M), ("a-r0", 10e9), ("s1-r0", 10e9), ("s2-r1", 10e9)]]
    paths = {0: ["a-r0", "l1", "l2"], 1: ["s1-r0", "l1"], 2: ["s2-r1", "l2"]}
    run.config = {"network": {"nodes": [], "links": links},
                  "flows": [{"id": f, "path": paths[f]} for f in rates]}
    run.events = events or []
    return run


def test_collapse_and_starvation_in_a_network_use_max_min_shares_and_the_limiting_link():
    # flow 0 (both links) at 3 Mbit/s, below 10 % of its 50 Mbit/s share,
    # while l1 and l2 each carry 96 Mbit/s: busy
    run = parking_lot({0: per_second(*[3 * M] * 5), 1: per_second(*[93 * M] * 5), 2: per_second(*[93 * M] * 5)})
    (a,) = collapses(run, AnalysisSettings())
    assert (a.flow_id, a.start_us, a.end_us) == (0, 0, 5 * S)
    assert "6.0% of its fair share" in a.reason and "its bottleneck (l1)" in a.reason
    # the same flow with only flow 1 beside it: its share is 50 on l1 (l2 has room)
    run = parking_lot({0: per_second(*[3 * M] * 5), 1: per_second(*[93 * M] * 5)})
    (a,) = collapses(run, AnalysisSettings())
    assert "6.0% of its fair share" in a.reason
    # l2's other user is idle: l2 not busy, but flow 0 is limited on l1, which is
    run = parking_lot({0: per_second(*[3 * M] * 5), 1: per_second(*[93 * M] * 5), 2: per_second(*[1 * M] * 5)})
    assert len(collapses(run, AnalysisSettings())) == 1
    # below 1 % of 50 Mbit/s over the run: starved; and no config at all → no verdicts
    run = parking_lot({0: per_second(*[0.3 * M] * 5), 1: per_second(*[95 * M] * 5), 2: per_second(*[95 * M] * 5)})
    (a,) = starvation(run, AnalysisSettings())
    assert a.flow_id == 0 and "(50 Mbit/s)" in a.reason
    run.config = None
    assert collapses(run, AnalysisSettings()) == [] and starvation(run, AnalysisSettings()) == []


def test_a_route_event_changes_a_flows_links_from_its_time():
    # flow 1 moves off l1 at 3 s: until then flow 0's 3 Mbit/s is below 10 %
    # of its 50 on a busy l1; after, l1 carries only flow 0's 3 Mbit/s
    ev = [{"time_us": 3 * S, "kind": "route", "flow_id": 1, "state": None, "link": None,
           "detail": "path: s1-r0 alt; return_path: alt/back r0-s1"}]
    rates = {0: per_second(*[3 * M] * 6), 1: per_second(*[93 * M] * 6)}
    run = parking_lot(rates, events=ev)
    (a,) = collapses(run, AnalysisSettings())
    assert (a.start_us, a.end_us) == (0, 3 * S)
    # without the event flow 1 stays on l1 and the collapse lasts the run
    (a,) = collapses(parking_lot(rates), AnalysisSettings())
    assert (a.start_us, a.end_us) == (0, 6 * S)


def test_the_path_controllers_moves_change_a_flows_links_as_route_events_do():
    # the controller moves flow 1 off l1 at 3 s and back at 5 s: its action
    # and release rows carry the new path ("moved: path: ..."), the state
    # rows without a flow do not
    ev = [{"time_us": 3 * S, "kind": "controller", "flow_id": None, "state": "action", "link": "l1",
           "detail": "saturated (>= 0.9) for 0.500 s; moving 1 flow(s) to their alternative"},
          {"time_us": 3 * S, "kind": "controller", "flow_id": 1, "state": "action", "link": "l1",
           "detail": "moved: path: s1-r0 alt; return_path: alt/back r0-s1"},
          {"time_us": 5 * S, "kind": "controller", "flow_id": 1, "state": "released", "link": "l1",
           "detail": "moved: path: s1-r0 l1; return_path: l1/back r0-s1"}]
    rates = {0: per_second(*[3 * M] * 8), 1: per_second(*[93 * M] * 8)}
    found = collapses(parking_lot(rates, events=ev), AnalysisSettings())
    assert [(a.start_us, a.end_us) for a in found] == [(0, 3 * S), (5 * S, 8 * S)]


def test_a_flow_capped_by_max_rate_wants_no_more_than_its_cap():
    # flow 1 is capped at 40 kbit/s and gets 38: no collapse; flow 0 has the rest
    run = parking_lot({0: per_second(*[96 * M] * 5), 1: per_second(*[38e3] * 5)})
    run.config["flows"][1]["max_rate_bps"] = 40e3
    assert collapses(run, AnalysisSettings()) == [] and starvation(run, AnalysisSettings()) == []
    del run.config["flows"][1]["max_rate_bps"]  # uncapped, 38 kbit/s of a 50 Mbit/s share is a collapse
    assert len(collapses(run, AnalysisSettings())) == 1


def test_a_networks_jfi_over_time_and_convergence_are_against_the_max_min_shares():
    # l2 at 60 Mbit/s: with all three flows the max-min shares are 30 (both
    # links), 70 (l1) and 30 (l2), before flow 2 joins at 1 s 50 and 50; an
    # allocation that gives exactly those converges at once, where the plain
    # index of 30/70/30 (0.84) never reaches 0.9
    run = parking_lot({0: per_second(50 * M, *[30 * M] * 4), 1: per_second(50 * M, *[70 * M] * 4),
                       2: per_second(0, *[30 * M] * 4)}, starts={2: 1 * S})
    run.config["network"]["links"][1]["rate_bps"] = 60 * M
    _, jfis = jfi_series(run)
    assert jfis == pytest.approx([1.0] * 5)
    joins = convergence(run, threshold=0.9)
    assert [(c.flow_id, c.converged_after_us) for c in joins] == [(0, 0.0), (1, 0.0), (2, 0.0)]
    assert run_metrics(run).jfi == pytest.approx(130 ** 2 / (3 * (30 ** 2 + 70 ** 2 + 30 ** 2)), rel=0.05)
    # the dumbbell's index is the plain one
    plain = synthetic_run({0: per_second(*[30 * M] * 3), 1: per_second(*[70 * M] * 3)})
    assert jfi_series(plain)[1] == pytest.approx([100 ** 2 / (2 * (30 ** 2 + 70 ** 2))] * 3)


def test_a_networks_drops_and_marks_are_every_queues():
    run = parking_lot({0: per_second(*[50 * M] * 2), 1: per_second(*[50 * M] * 2)})
    t = np.array([1.0, 2.0]) * S
    for link, drops, marks in [("l1", [3, 7], [0, 1]), ("l2", [0, 2], [0, 0])]:
        run.queue[link] = {"time_us": t, "backlog_bytes": np.zeros(2), "backlog_pkts": np.zeros(2),
                           "drops": np.array(drops, float), "ecn_marks": np.array(marks, float)}
    rm = run_metrics(run)
    assert (rm.drops, rm.ecn_marks, rm.backlog_mean_bytes) == (9, 1, None)


def test_link_metrics_of_a_network_by_hand():
    run = parking_lot({0: per_second(*[40 * M] * 2), 1: per_second(*[50 * M] * 2)})
    run.config["network"]["links"][0]["rate_bps"] = 100 * M
    t = np.array([1.0, 2.0]) * S
    # l1 sent 22.5 MB on the wire in 2 s of 100 Mbit/s: 0.9; l2 sent nothing yet
    run.queue["l1"] = {"time_us": t, "backlog_bytes": np.array([1000.0, 3000.0]), "backlog_pkts": np.zeros(2),
                       "drops": np.array([1.0, 4.0]), "ecn_marks": np.zeros(2),
                       "tx_bytes": np.array([11.25e6, 22.5e6])}
    run.queue["l2"] = {"time_us": t, "backlog_bytes": np.zeros(2), "backlog_pkts": np.zeros(2),
                       "drops": np.zeros(2), "ecn_marks": np.zeros(2), "tx_bytes": np.zeros(2)}
    v = run_metrics(run).values()
    assert v["link_utilisation[l1]"] == pytest.approx(0.9) and v["link_utilisation[l2]"] == 0
    assert (v["link_backlog_mean_bytes[l1]"], v["link_drops[l1]"], v["link_drops[l2]"]) == (2000.0, 4.0, 0.0)
    # the dumbbell has none: its bottleneck has the run-level keys
    dumbbell = synthetic_run({0: per_second(50 * M)})
    dumbbell.queue["bottleneck"] = run.queue["l1"]
    assert not any(k.startswith("link_") for k in run_metrics(dumbbell).values())


def test_a_slow_access_link_limits_the_fair_share_on_the_dumbbell():
    # sender 0's access link is 5 Mbit/s: its share is 5, the other flow's 95;
    # neither 4.8 Mbit/s nor 95 is a collapse (C / n would call 4.8 one)
    run = synthetic_run({0: per_second(*[4.8 * M] * 5), 1: per_second(*[95 * M] * 5)})
    run.config = {"senders": [{"rate_bps": 5 * M}, {"rate_bps": 10e9}], "bottleneck": {"rate_bps": 100 * M},
                  "flows": [{"id": 0, "sender": 0}, {"id": 1, "sender": 1}]}
    assert collapses(run, AnalysisSettings()) == []
    run.config = None  # without the config: C / n
    assert len(collapses(run, AnalysisSettings())) == 1


def test_starvation():
    run = synthetic_run({0: per_second(*[95 * M] * 5), 1: per_second(*[0.2 * M] * 5)})
    (a,) = starvation(run, AnalysisSettings())
    assert (a.kind, a.flow_id) == ("starvation", 1)  # 0.2 < 1 % of 50 Mbit/s
    run = synthetic_run({0: per_second(*[95 * M] * 5), 1: per_second(*[0.6 * M] * 5)})
    assert starvation(run, AnalysisSettings()) == []
    rpc = synthetic_run({0: per_second(*[95 * M] * 5), 1: per_second(*[1 * M] * 5)}, kinds={1: "rpc"})
    (a,) = starvation(rpc, AnalysisSettings())  # no RPC completed in 5 s
    assert a.flow_id == 1 and "no RPC" in a.reason
    rpc.rpcs[1] = {"start_us": np.array([0.0]), "latency_us": np.array([30_000.0])}
    assert starvation(rpc, AnalysisSettings()) == []


def test_not_steady():
    s = AnalysisSettings(steady_after_us=2 * S)
    rising = synthetic_run({0: per_second(10 * M, 10 * M, 10 * M, 10 * M, 20 * M, 20 * M)})
    (a,) = not_steady(rising, s, (2 * S, 6 * S))  # halves 10 and 20 Mbit/s: 50 % > 25 %
    assert a.flow_id == 0 and "10 Mbit/s to 20 Mbit/s" in a.reason
    flat = synthetic_run({0: per_second(10 * M, 10 * M, 10 * M, 10 * M, 11 * M, 11 * M)})
    assert not_steady(flat, s, (2 * S, 6 * S)) == []
    (a,) = not_steady(flat, s, (6 * S, 6 * S))
    assert a.flow_id is None and "empty" in a.reason


def test_collapse_counted_per_configuration():
    runs = [collapse_run(3) if i in (1, 3) else collapse_run(0) for i in range(5)]
    for i, r in enumerate(runs):
        r.run_id, r.repetition = f"r{i}", i
    a = analyze(runs, AnalysisSettings(steady_after_us=7 * S))
    (c,) = a.configs
    assert c.anomaly_counts()["collapse"] == 2
    assert c.anomaly_text() == "collapse in 2 of 5 runs"
    flagged = {f.run_id for f in a.flags() if f.kind == "collapse"}
    assert flagged == {"r1", "r3"}


def test_outlier_run_flagged_with_reason():
    runs = []
    for i, slow in enumerate([20, 21, 19, 20, 3]):
        r = synthetic_run({0: per_second(*[slow * M] * 3)}, run_id=f"r{i}", rep=i)
        runs.append(r)
    a = analyze(runs)
    outs = [f for f in a.flags() if f.kind == "outlier"]
    assert {f.run_id for f in outs} == {"r4"}
    assert any("goodput of 'g0' 3 Mbit/s" in f.reason and "median 20 Mbit/s" in f.reason for f in outs)


# -- statistics ------------------------------------------------------------------------------


def test_spread_and_mean_ci():
    s = spread([3.0, 1.0, 2.0, None, 10.0])
    assert (s.n, s.median, s.mean, s.min, s.max) == (4, 2.5, 4.0, 1.0, 10.0)
    # By hand: the sample sd of 3, 1, 2, 10 is √(50/3) = 4.082; t(0.975, 3) = 3.182 (any t table);
    # half width 3.182 × 4.082 / 2 = 6.496; the lower end 4 − 6.496 < 0 is clipped at 0.
    assert s.ci_low == 0.0 and s.ci_high == pytest.approx(10.496, abs=0.002)
    assert mean_ci([10.0, 12.0, 14.0]) == pytest.approx((12.0 - 4.968, 12.0 + 4.968), abs=0.002)
    assert mean_ci([-1.0, 1.0]) == pytest.approx((-12.706, 12.706), abs=0.001)  # a negative value: no clip
    assert mean_ci([0.86, 0.91], upper=1.0) == pytest.approx((0.885 - 0.3177, 1.0), abs=0.001)  # Jain's index: at most 1
    assert spread([0.86, 0.91], upper=1.0).ci_high == 1.0 and spread([0.86, 0.91]).ci_high > 1.0
    assert mean_ci([5.0]) == (None, None) and mean_ci([4.0, 4.0]) == (4.0, 4.0)
    assert spread([5.0]).drawn_ci == (5.0, 5.0) and spread([10.0, 12.0, 14.0]).drawn_ci == mean_ci([10.0, 12.0, 14.0])
    assert mean_ci([]) == (None, None)
    assert spread([]).n == 0 and spread([]).median is None


def test_t_quantiles_match_the_tables():
    # Two-sided 95 % and 99 % points of Student's t, as printed in any table.
    table = {(0.95, 1): 12.706, (0.95, 2): 4.303, (0.95, 4): 2.776, (0.95, 9): 2.262, (0.95, 29): 2.045,
             (0.95, 120): 1.980, (0.99, 1): 63.657, (0.99, 5): 4.032, (0.99, 30): 2.750}
    for (level, df), t in table.items():
        assert t_quantile(level, df) == pytest.approx(t, abs=0.0015), (level, df)


def test_mean_ci_holds_the_mean_95_percent_of_the_time():
    # Normal runs of known mean, 2 to 10 repetitions: the interval must hold the mean about
    # 95 % of the time (1500 draws: ±1.7 % at 3 sigma). The percentile bootstrap used
    # before held it 48 % of the time at n = 2 and 83 % at n = 5.
    rng = np.random.default_rng(11)
    for n in (2, 3, 5, 10):
        draws = rng.normal(100.0, 15.0, size=(1500, n))
        held = sum(lo <= 100.0 <= hi for lo, hi in (mean_ci(d) for d in draws))
        assert 0.93 <= held / 1500 <= 0.97, (n, held)


def test_outliers_rule():
    assert outliers([10, 10.5, 9.8, 10.2, 1.0]) == [4]
    assert outliers([10, 10.5, 9.8]) == []
    assert outliers([10, 10, 10, 10, 10.5]) == []  # within the 25 % floor
    assert outliers([1, 2]) == []  # too few
    assert outliers([5, None, 5, 5, 100]) == [4]


# -- models ---------------------------------------------------------------------------------


def test_mathis_by_hand():
    # 8 · 1448 B / 0.1 s · √1.5 / √0.01 = 115840 · 12.2474 = 1.4187e6 bit/s
    assert mathis_bps(1448, 0.1, 0.01) == pytest.approx(115840 * math.sqrt(1.5) / 0.1)
    assert mathis_bps(1448, 0.1, 0.01) == pytest.approx(1.41875e6, rel=1e-4)
    assert mathis_bps(1448, 0.1, 0.0) is None
    # quadrupling the loss halves the throughput
    assert mathis_bps(1448, 0.02, 0.04) == pytest.approx(mathis_bps(1448, 0.02, 0.01) / 2)


def test_padhye_by_hand():
    # b=1, p=0.01, RTT 0.1 s, T0 1 s:
    # 0.1·√(0.02/3) = 0.0081650; 1·3·√(0.03/8)·0.01·(1+0.0032) = 0.0018430 → 1/0.0100080 = 99.92 segs/s
    seg = 1 / (0.1 * math.sqrt(0.02 / 3) + 3 * math.sqrt(0.03 / 8) * 0.01 * 1.0032)
    assert padhye_bps(1448, 0.1, 0.01, t0_s=1.0) == pytest.approx(seg * 11584)
    assert seg == pytest.approx(99.92, abs=0.01)
    # the receive window caps it: 10 segments per RTT = 100 segs/s... 5 segs → 50 segs/s
    assert padhye_bps(1448, 0.1, 0.01, t0_s=1.0, wmax_segs=5) == pytest.approx(50 * 11584)
    # at low loss Padhye approaches Mathis with C = √(3/(2b))
    assert padhye_bps(1448, 0.1, 1e-6, t0_s=1.0) == pytest.approx(mathis_bps(1448, 0.1, 1e-6), rel=0.01)


def test_padhye_wmax_is_the_window_linux_advertises():
    """Wmax is the receive window, 0.625 × rmem for 1448-byte segments (the
    window the kernel's ACKs carry and the simulator's senders fill), not
    the whole buffer."""
    from ccbench.analysis.models import receive_window_segs

    tcp = {"mss": 1448, "header_bytes": 52, "rmem_bytes": 6 << 20}
    assert receive_window_segs(tcp) == pytest.approx(3_932_160 / 1448)
    assert receive_window_segs(dict(tcp, rmem_bytes=256_000)) == pytest.approx(160_000 / 1448)


def test_loss_sweep_models_use_each_series_own_rtt():
    """One Mathis and one Padhye curve per bulk series, at that series' RTT
    (not the median RTT of every series at the loss point), none for RPCs."""
    from ccbench.analysis.sweeps import sweep_plot

    rtt = {"cubic": 2_000.0, "bbr": 3_000.0, "reno": 9_000.0}  # µs: three series, median 3 ms
    cfg = {"tcp": {"mss": 1448, "min_rto_ns": 200_000_000, "delayed_ack": "linux"},
           "bottleneck": {"rate_bps": 1e9}}
    runs = []
    for cca, r in rtt.items():
        for loss in ("1%", "4%"):
            run = synthetic_run({0: per_second(50 * M, 50 * M), 1: per_second(1 * M, 1 * M)},
                                kinds={1: "rpc"}, run_id=f"{cca}-{loss}", config_id=f"{cca}-{loss}",
                                params={"flows.0.cca": cca, "topology.bottleneck.loss": loss})
            run.config = cfg
            for f in run.flows:
                f["rtt_mean_us"] = r
            run.flows[1]["group_name"] = "rpc"
            runs.append(run)
    plot = sweep_plot(analyze(runs), "goodput", "loss")
    bulk = [s.label for s in plot.series if s.label.startswith("g0")]
    assert len(bulk) == 3 and len(plot.series) == 6
    assert sorted(m.label for m in plot.models) == sorted(
        f"{k} model · {b}" for k in ("Mathis", "Padhye") for b in bulk)  # nothing for the rpc series
    for m in plot.models:
        own = rtt[m.of.split("=")[-1]] / 1e6
        assert [p.x_label for p in m.points] == ["1%", "4%"]
        for pt in m.points:
            p = pt.x / 100
            want = (mathis_bps(1448, own, p) if m.label.startswith("Mathis")
                    else padhye_bps(1448, own, p, t0_s=own + 0.2, b=2, wmax_segs=None))
            assert pt.spread.median == pytest.approx(min(want, 1e9))
            assert pt.rtt_us == own * 1e6
    # the reno curve (9 ms) is 4.5x below the cubic one (2 ms) at the same loss
    by = {m.label: m.points[0].spread.median for m in plot.models}
    cubic = next(v for k, v in by.items() if k.startswith("Mathis") and k.endswith("cca=cubic"))
    reno = next(v for k, v in by.items() if k.startswith("Mathis") and k.endswith("cca=reno"))
    assert cubic / reno == pytest.approx(4.5)


def test_sweep_series_split_by_study_and_backend_and_refuse_the_x_axis_as_group():
    from ccbench.analysis.sweeps import sweep_plot

    runs = []
    for study, backend, params in [("a", "sim", {"topology.bottleneck.loss": "1%"}),
                                   ("a", "linux", {"topology.bottleneck.loss": "1%"}),
                                   ("b", "sim", {"topology.bottleneck.loss": "1%", "flows.0.cca": "bbr"})]:
        run = synthetic_run({0: per_second(50 * M)}, run_id=f"{study}{backend}", config_id=f"{study}{backend}",
                            params=params)
        run.study, run.backend = study, backend
        runs.append(run)
    plot = sweep_plot(analyze(runs), "goodput", "loss")
    # three series, never pooled; no "cca=None" for the study without that key
    assert sorted(s.label for s in plot.series) == ["g0 · a · linux", "g0 · a · sim", "g0 · cca=bbr · b · sim"]
    with pytest.raises(UsageError, match="is the x axis already"):
        sweep_plot(analyze(runs), "goodput", "loss", group="loss")


# -- settings ---------------------------------------------------------------------------------


def test_settings_from_the_study_file():
    base = '[study]\nname = "x"\n[topology.bottleneck]\nrate = "10Mbit"\n[[flows]]\ncca = "reno"\n'
    assert from_study_text(base) == AnalysisSettings()
    s = from_study_text(base + '[analysis]\nsteady_after = "10s"\ncollapse_fraction = 0.2\ncollapse_min = "3s"\n')
    assert (s.steady_after_us, s.collapse_fraction, s.collapse_min_us, s.converge_jfi) == (10 * S, 0.2, 3 * S, 0.9)
    with pytest.raises(UsageError, match="collapse_fraction"):
        from_study_text(base + "[analysis]\ncollapse_fraction = 3\n")
    assert s.with_overrides(collapse_fraction=0.5, steady_after_us=None).collapse_fraction == 0.5


def test_analysis_table_is_validated_with_the_study():
    from ccbench.errors import StudyError
    from ccbench.spec import parse_study

    base = ('[study]\nname = "x"\nduration = "1s"\n[topology.bottleneck]\nrate = "10Mbit"\n'
            'delay = "10ms"\n[[flows]]\ncca = "reno"\n')
    with pytest.raises(StudyError, match=r"analysis\.collapse_min"):
        parse_study(base + '[analysis]\ncollapse_min = "2"\n', filename="a.toml")
    with pytest.raises(StudyError, match="did you mean 'steady_after'"):
        parse_study(base + '[analysis]\nsteady_afterr = "2s"\n', filename="a.toml")
    # analysis knobs do not change the runs
    assert [r.run_id for r in parse_study(base + '[analysis]\nsteady_after = "0.5s"\n').runs()] == \
        [r.run_id for r in parse_study(base).runs()]
