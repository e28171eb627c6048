"""End-to-end smoke tests of the simulator's further congestion-control
algorithms: each runs alone through a study file on a 100 Mbit/s, 20 ms RTT
path with a one-BDP FIFO, must fill at least 80 % of the link and must be
deterministic. (Each algorithm's defining behaviour is unit-tested next to
its implementation in crates/sim/src/cc/.)"""

from __future__ import annotations

import json

import pytest

from ccbench import _core
from ccbench.spec import parse_study
from simrun import MSS, ceiling_bps, goodput_between, series, single_flow

MORE_CCAS = ["newreno", "vegas", "bic", "highspeed", "htcp", "illinois", "westwood", "dctcp", "bbr3", "nv"]


def run(cca: str) -> tuple[str, dict]:
    (r,) = parse_study(single_flow(cca, "1bdp", duration="20s"), filename=f"{cca}.toml").runs()
    raw = _core.simulate(json.dumps(r.config))
    return raw, json.loads(raw)


def test_every_algorithm_is_offered():
    assert set(MORE_CCAS) <= set(_core.algorithms())


@pytest.mark.parametrize("cca", MORE_CCAS)
def test_alone_fills_the_link_and_is_deterministic(cca):
    raw, res = run(cca)
    ceiling = ceiling_bps(100e6)
    # Past slow start (and, for the delay-based ones, their settling).
    steady = goodput_between(res, 0, 5, 20)
    assert steady >= 0.80 * ceiling, f"{cca}: {steady / 1e6:.1f} Mbit/s from 5 s to 20 s"
    assert res["flows"][0]["goodput_bps"] >= 0.75 * ceiling
    # The CCA's own state is reported.
    assert all(s for s in series(res, 0, "cca_state"))
    raw2, _ = run(cca)
    assert raw == raw2, f"{cca}: two runs differ"


def test_nv_alone_on_a_data_centre_path_keeps_its_pad():
    # NV's home: 10 Gbit/s, 20 us RTT (netdev-streams' LAN), one flow. After
    # slow start it holds cwnd at the BDP (~17 segments) plus nv_pad (10)
    # without a loss; the loss cycles of studies/netdev come from flows
    # sharing a drop threshold, not from NV alone.
    text = """
[study]
name = "nv-lan"
duration = "1s"
[topology]
senders = 1
access = { rate = "40Gbit", delay = "0ms" }
[topology.bottleneck]
rate = "10Gbit"
delay = "10us"
buffer = "2MB"
[[flows]]
cca = "nv"
"""
    (r,) = parse_study(text, filename="nv-lan.toml").runs()
    res = json.loads(_core.simulate(json.dumps(r.config)))
    flow = res["flows"][0]
    assert flow["retrans_segs"] == 0
    cwnd = [c / MSS for c in series(res, 0, "cwnd_bytes")[3:]]
    bdp = 10e9 * 20e-6 / 8 / (MSS + 52)
    assert all(bdp <= c <= bdp + 10 + 4 for c in cwnd), cwnd
    assert goodput_between(res, 0, 0.2, 1.0) >= 0.9 * ceiling_bps(10e9)
