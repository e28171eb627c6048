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
from simrun import ceiling_bps, goodput_between, series, single_flow

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
