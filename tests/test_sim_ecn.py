"""ECN through the TCP endpoints and a marking queue: DCTCP (RFC 8257)
against RFC 3168 ECN with a classic CCA, on the step-marking queue DCTCP
is deployed with."""

from __future__ import annotations

from simrun import ceiling_bps, run_text

CEILING = ceiling_bps(100e6)


def two_flows(cca: str, qdisc: str, ecn: bool) -> dict:
    text = f"""
[study]
name = "ecn"
duration = "20s"
[topology]
senders = 1
[topology.bottleneck]
rate = "100Mbit"
delay = "10ms"
buffer = "2bdp"
qdisc = "{qdisc}"
[tcp]
ecn = {str(ecn).lower()}
[[flows]]
cca = "{cca}"
count = 2
start_jitter = "100ms"
"""
    ((_, res),) = run_text(text)
    return res


def last_queue(res: dict, column: str) -> int:
    q = res["queue"]
    return [v for link, v in zip(q["link"], q[column]) if link == "bottleneck"][-1]


def test_dctcp_keeps_the_queue_short_without_loss():
    res = two_flows("dctcp", "step_ecn", ecn=False)  # DCTCP turns ECN on itself
    total = sum(f["goodput_bps"] for f in res["flows"])
    assert total > 0.9 * CEILING
    assert last_queue(res, "drops") == 0
    assert last_queue(res, "ecn_marks") > 1000
    assert sum(f["retrans_segs"] for f in res["flows"]) == 0
    # The step threshold is BDP/7: the standing queue stays a few ms.
    for f in res["flows"]:
        assert f["rtt_mean_us"] < 20_000 + 5_000


def test_dctcp_cuts_in_proportion_where_rfc3168_halves():
    dctcp = sum(f["goodput_bps"] for f in two_flows("dctcp", "step_ecn", ecn=False)["flows"])
    reno = sum(f["goodput_bps"] for f in two_flows("reno", "step_ecn", ecn=True)["flows"])
    # Halving on every marked window empties a shallow-threshold queue.
    assert dctcp > 1.15 * reno


def test_without_marking_dctcp_falls_back_to_loss():
    res = two_flows("dctcp", "fifo", ecn=False)
    assert last_queue(res, "ecn_marks") == 0
    assert last_queue(res, "drops") > 0
    assert sum(f["retrans_segs"] for f in res["flows"]) == last_queue(res, "drops")
