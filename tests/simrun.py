"""Run study text on the simulator core directly, for behaviour tests."""

from __future__ import annotations

import json

from ccbench import _core
from ccbench.spec import parse_study

MSS = 1448
HEADER = 52  # IP + TCP + timestamp option, as the simulator puts on the wire


def ceiling_bps(rate_bps: float) -> float:
    """The most goodput a link can carry: its payload share."""
    return rate_bps * MSS / (MSS + HEADER)


def single_flow(cca: str, buffer: str, duration: str = "30s", loss: str = "0%", delay: str = "10ms") -> str:
    return f"""
[study]
name = "single"
duration = "{duration}"
[topology]
senders = 1
[topology.bottleneck]
rate = "100Mbit"
delay = "{delay}"
loss = "{loss}"
buffer = "{buffer}"
[[flows]]
cca = "{cca}"
"""


def run_text(text: str, filename: str = "test.toml") -> list[tuple[object, dict]]:
    """Every run of the study, with the core's result tables."""
    study = parse_study(text, filename=filename)
    return [(r, json.loads(_core.simulate(json.dumps(r.config)))) for r in study.runs()]


def jain(xs) -> float:
    xs = list(xs)
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


def goodput_between(res: dict, flow_id: int, t0_s: float, t1_s: float) -> float:
    """Goodput (bit/s) of one flow between two sample times, from the
    cumulative delivered-bytes series."""
    s = res["samples"]
    at = {t: b for f, t, b in zip(s["flow_id"], s["time_us"], s["delivered_bytes"]) if f == flow_id}
    t0, t1 = round(t0_s * 1e6), round(t1_s * 1e6)
    return (at[t1] - at[t0]) * 8 / (t1_s - t0_s)


def series(res: dict, flow_id: int, column: str) -> list:
    s = res["samples"]
    return [v for f, v in zip(s["flow_id"], s[column]) if f == flow_id]
