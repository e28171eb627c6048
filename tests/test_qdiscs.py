"""Queue disciplines: the study-file syntax, the resolved config, and what
each discipline does to TCP flows in the simulator (end to end).

The Rust unit tests in crates/netcore/src/qdisc/ check each discipline on
synthetic packet streams; these check the same behaviour through study files.
"""

from __future__ import annotations

import json

import pytest

from ccbench import _core
from ccbench.errors import StudyError
from ccbench.spec import QDISCS, parse_study

from simrun import goodput_between, jain, run_text


def study(bottleneck: str, flows: str, *, senders: str = "1", duration: str = "30s", tcp: str = "",
          extra: str = "") -> str:
    return f"""
[study]
name = "qdisc-test"
duration = "{duration}"
sample_interval = "1s"

[topology]
senders = {senders}

[topology.bottleneck]
{bottleneck}

[tcp]
{tcp}

{flows}
{extra}
"""


BN = 'rate = "100Mbit"\ndelay = "10ms"\n'
ONE_FLOW = '[[flows]]\ncca = "cubic"\n'


def config(text: str) -> dict:
    return parse_study(text).runs()[0].config


def qdisc_of(text: str) -> dict:
    return config(text)["bottleneck"]["qdisc"]


def last(res: dict, column: str, link: str = "bottleneck"):
    q = res["queue"]
    return [v for lk, v in zip(q["link"], q[column]) if lk == link][-1]


# ------------------------------------------------------------------ spec


def test_names_match_the_core():
    assert tuple(_core.qdiscs()) == QDISCS


def test_name_and_table_forms_resolve_with_defaults():
    assert qdisc_of(study(BN, ONE_FLOW)) == {"kind": "fifo"}
    cfg = config(study(BN + 'qdisc = "fq_codel"', ONE_FLOW))
    # Linux fq_codel: 1024 flows, quantum one MTU (mss + 52 here), 10240 packets, ECN on.
    assert cfg["bottleneck"]["qdisc"] == {
        "kind": "fq_codel", "target_ns": 5_000_000, "interval_ns": 100_000_000, "mtu_bytes": 1500,
        "ecn": True, "flows": 1024, "quantum_bytes": 1500, "drop_batch": 64}
    assert (cfg["bottleneck"]["buffer_pkts"], cfg["bottleneck"]["buffer_bytes"]) == (10240, None)
    table = study(BN + '[topology.bottleneck.qdisc]\nkind = "codel"\ntarget = "2ms"\ninterval = "50ms"\necn = true',
                  ONE_FLOW)
    assert qdisc_of(table) == {"kind": "codel", "target_ns": 2_000_000, "interval_ns": 50_000_000,
                               "mtu_bytes": 1500, "ecn": True}
    # An explicit buffer wins over the discipline's default limit.
    assert config(study(BN + 'buffer = "300pkt"\nqdisc = "fq"', ONE_FLOW))["bottleneck"]["buffer_pkts"] == 300


def test_red_defaults_follow_tc_and_sizes_take_units():
    # 1 BDP at 100 Mbit/s x 20 ms = 250 KB: max = limit/4, min = max/3.
    q = qdisc_of(study(BN + 'qdisc = "red"', ONE_FLOW))
    assert q == {"kind": "red", "min_bytes": 20833, "max_bytes": 62500, "max_p": 0.02,
                 "burst_pkts": (2 * 20833 + 62500) // 3000, "avpkt_bytes": 1000, "ecn": False,
                 "harddrop": False, "gentle": False}
    q = qdisc_of(study(BN + '[topology.bottleneck.qdisc]\nkind = "red"\nmin = "20pkt"\nmax = "0.5bdp"\n'
                       'max_p = "10%"\necn = true', ONE_FLOW))
    assert (q["min_bytes"], q["max_bytes"], q["max_p"], q["ecn"]) == (30_000, 125_000, 0.1, True)


def test_step_ecn_default_threshold_is_a_seventh_of_the_bdp():
    assert qdisc_of(study(BN + 'qdisc = "step_ecn"', ONE_FLOW)) == {"kind": "step_ecn", "threshold_bytes": 35714}
    q = qdisc_of(study(BN + '[topology.bottleneck.qdisc]\nkind = "step_ecn"\nthreshold = "65pkt"', ONE_FLOW))
    assert q["threshold_bytes"] == 65 * 1500


def test_twoclass_classes_and_flow_queue_class():
    text = study(BN + '[topology.bottleneck.qdisc]\nkind = "twoclass"\n'
                 'classes = [{weight = 1}, {weight = 3, buffer = "100pkt", ecn_threshold = "20pkt"}]',
                 ONE_FLOW + '[[flows]]\ncca = "dctcp"\nqueue_class = 1\n')
    cfg = config(text)
    assert cfg["bottleneck"]["qdisc"] == {"kind": "twoclass", "quantum_bytes": 1500, "classes": [
        {"weight": 1, "buffer_bytes": 250_000, "buffer_pkts": None, "ecn_threshold_bytes": None},
        {"weight": 3, "buffer_bytes": None, "buffer_pkts": 100, "ecn_threshold_bytes": 30_000}]}
    assert "queue_class" not in cfg["flows"][0]
    assert cfg["flows"][1]["queue_class"] == 1


def test_cebinae_round_follows_the_rtt():
    q = qdisc_of(study(BN + 'qdisc = "cebinae"', ONE_FLOW))
    assert q == {"kind": "cebinae", "round_ns": 1 << 25, "rounds_per_update": 1, "tau": 0.01,
                 "delta_port": 0.01, "delta_flow": 0.01, "flow_slots": 4096}
    long = 'rate = "100Mbit"\ndelay = "100ms"\nqdisc = "cebinae"\n'  # RTT 200 ms -> 2^28 ns
    assert qdisc_of(study(long, ONE_FLOW))["round_ns"] == 1 << 28


def test_qdisc_kind_can_be_swept():
    text = study(BN, ONE_FLOW, extra='[sweep]\n"topology.bottleneck.qdisc" = ["fifo", "fq", "cebinae"]\n')
    kinds = [r.config["bottleneck"]["qdisc"]["kind"] for r in parse_study(text).runs()]
    assert kinds == ["fifo", "fq", "cebinae"]
    text = study(BN + '[topology.bottleneck.qdisc]\nkind = "codel"', ONE_FLOW,
                 extra='[sweep]\n"topology.bottleneck.qdisc.target" = ["1ms", "5ms"]\n')
    assert [r.config["bottleneck"]["qdisc"]["target_ns"] for r in parse_study(text).runs()] == [1_000_000, 5_000_000]


@pytest.mark.parametrize("bottleneck, extra, fragment", [
    ('qdisc = "sfq"', "", "topology.bottleneck.qdisc: unknown queue discipline (got 'sfq'"),
    ('[topology.bottleneck.qdisc]\ntarget = "5ms"', "", "topology.bottleneck.qdisc.kind: required field is missing"),
    ('[topology.bottleneck.qdisc]\nkind = "fq"\ntarget = "5ms"', "",
     "topology.bottleneck.qdisc.target: not a parameter of 'fq' (got '5ms'; allowed: its parameters: flow_limit"),
    ('[topology.bottleneck.qdisc]\nkind = "codel"\ntarget = 5', "", "'5ms'"),
    ('[topology.bottleneck.qdisc]\nkind = "red"\nmin = "100pkt"\nmax = "20pkt"', "",
     "topology.bottleneck.qdisc.min: must not be above max"),
    ('[topology.bottleneck.qdisc]\nkind = "red"\nmax_p = "0%"', "", "topology.bottleneck.qdisc.max_p: must be above 0%"),
    ('[topology.bottleneck.qdisc]\nkind = "twoclass"\nclasses = [{}]', "",
     "topology.bottleneck.qdisc.classes: must have exactly 2 entries"),
    ('[topology.bottleneck.qdisc]\nkind = "cebinae"\ntau = "100%"', "", "topology.bottleneck.qdisc.tau: must be below 100%"),
    ('qdisc = "codel"', '[sweep]\n"topology.bottleneck.qdisc.target" = ["1ms"]\n',
     "topology.bottleneck.qdisc is written as a name ('codel'); to sweep one of its parameters, write it as a table"),
])
def test_errors_are_one_line_and_name_the_field(bottleneck, extra, fragment):
    with pytest.raises(StudyError) as ei:
        parse_study(study(BN + bottleneck, ONE_FLOW, extra=extra), filename="q.toml")
    msg = str(ei.value)
    assert "\n" not in msg and msg.startswith("q.toml: ")
    assert fragment in msg, msg


def test_queue_class_is_0_or_1():
    with pytest.raises(StudyError, match="flows.0.queue_class: must be <= 1"):
        parse_study(study(BN, '[[flows]]\ncca = "cubic"\nqueue_class = 2\n'))


@pytest.mark.parametrize("kind", QDISCS)
def test_every_discipline_runs_in_the_simulator(kind):
    (run, res), = run_text(study(BN + f'qdisc = "{kind}"', '[[flows]]\ncca = "cubic"\ncount = 2\n', duration="3s"))
    assert sum(f["bytes_delivered"] for f in res["flows"]) > 0.8 * 100e6 / 8 * 2  # most of 3 s at 100 Mbit/s
    assert last(res, "backlog_pkts") >= 0


def test_core_accepts_a_name_for_the_qdisc():
    cfg = config(study(BN, ONE_FLOW, duration="1s"))
    cfg["bottleneck"]["qdisc"] = "codel"
    json.loads(_core.simulate(json.dumps(cfg)))
    cfg["bottleneck"]["qdisc"] = {"kind": "codel", "targt_ns": 1}
    with pytest.raises(ValueError, match="targt_ns"):
        _core.simulate(json.dumps(cfg))


# ------------------------------------------------------------------ behaviour


TWO_RTTS = '[{delay = "10ms"}, {delay = "80ms"}]'  # base RTTs 22 and 162 ms
TWO_CUBIC = '[[flows]]\ncca = "cubic"\nsender = 0\n[[flows]]\ncca = "cubic"\nsender = 1\n'


def _goodputs_two_rtts(kind: str) -> list[float]:
    (run, res), = run_text(study(f'rate = "50Mbit"\ndelay = "1ms"\nqdisc = "{kind}"', TWO_CUBIC, senders=TWO_RTTS))
    return [goodput_between(res, i, 10, 30) for i in range(2)]


def test_fq_shares_equally_between_rtts():
    fifo, fq, fq_codel = (_goodputs_two_rtts(k) for k in ("fifo", "fq", "fq_codel"))
    # Measured: fq and fq_codel JFI 1.00 and 0.99. On the FIFO the short RTT takes most:
    # 35 of 48 Mbit/s here; the kernel behind the emulator (same study, three runs) 42 of 48,
    # the two agreeing on every window until about 8 s, when a drop the kernel's long-RTT
    # flow takes and the simulator's does not sends them apart (docs/sim-model.md).
    assert jain(fq) > 0.95 and jain(fq_codel) > 0.95, (fq, fq_codel)
    assert fifo[0] > 2 * fifo[1], fifo


def _standing_delay_ms(bottleneck: str) -> tuple[float, dict]:
    (run, res), = run_text(study('rate = "20Mbit"\ndelay = "10ms"\n' + bottleneck, ONE_FLOW,
                                 senders='[{delay = "5ms"}]'))
    f = res["flows"][0]
    return (f["rtt_mean_us"] - f["rtt_min_us"]) / 1e3, res


def test_codel_keeps_the_standing_queue_near_target():
    fifo, _ = _standing_delay_ms('buffer = "4bdp"')
    codel, res = _standing_delay_ms('buffer = "4bdp"\nqdisc = "codel"')
    fq_codel, _ = _standing_delay_ms('buffer = "4bdp"\nqdisc = "fq_codel"')
    # Measured: FIFO ~97 ms of queue, CoDel and fq_codel ~3 ms (target 5 ms).
    assert codel < 4 * 5 and fq_codel < 4 * 5, (codel, fq_codel)
    assert fifo > 5 * codel, (fifo, codel)
    assert last(res, "drops") > 0


def test_red_with_ecn_marks_instead_of_dropping():
    red = '[topology.bottleneck.qdisc]\nkind = "red"\necn = true\nmin = "0.2bdp"\nmax = "0.6bdp"\nmax_p = "10%"'
    (run, res), = run_text(study('rate = "20Mbit"\ndelay = "10ms"\nbuffer = "4bdp"\n' + red,
                                 '[[flows]]\ncca = "cubic"\ncount = 2\n', senders='[{delay = "5ms"}]',
                                 tcp="ecn = true"))
    sent = sum(f["sent_segs"] for f in res["flows"])
    assert last(res, "ecn_marks") > 0
    assert last(res, "drops") <= 0.001 * sent, (last(res, "drops"), sent)


def test_red_without_ecn_drops_early():
    red = '[topology.bottleneck.qdisc]\nkind = "red"\nmin = "0.2bdp"\nmax = "0.6bdp"\nmax_p = "10%"'
    delay, res = _standing_delay_ms('buffer = "4bdp"\n' + red)
    fifo, _ = _standing_delay_ms('buffer = "4bdp"')
    assert last(res, "drops") > 0 and last(res, "ecn_marks") == 0
    assert delay < fifo / 3, (delay, fifo)


def _cebinae_row(kind: str, cca: str) -> list[float]:
    # The Cebinae paper's row: 100 Mbit/s, RTT ~50 ms, 420 packets, 16 + 1 flows.
    text = study(f'rate = "100Mbit"\ndelay = "23ms"\nbuffer = "420pkt"\nqdisc = "{kind}"',
                 f'[[flows]]\ncca = "{cca}"\ncount = 16\nstart_jitter = "1s"\n'
                 '[[flows]]\ncca = "cubic"\nstart_jitter = "1s"\n',
                 senders='1\naccess = { rate = "10Gbit", delay = "1ms" }', duration="60s")
    (run, res), = run_text(text)
    return [goodput_between(res, i, 20, 60) for i in range(17)]


def test_cebinae_raises_fairness_of_vegas_against_cubic():
    fifo, ceb, fq = (_cebinae_row(k, "vegas") for k in ("fifo", "cebinae", "fq"))
    # Measured (seeds 1-3): JFI FIFO 0.10 (CUBIC takes ~72 of 96 Mbit/s), Cebinae
    # 0.84-0.93 with the default round (67 ms here; 0.96-1.0 with 33-134 ms), FQ 1.00.
    assert jain(ceb) > 0.75 and jain(ceb) > jain(fifo) + 0.5, (jain(fifo), jain(ceb))
    assert ceb[16] < 0.3 * fifo[16], "the CUBIC flow is taxed"
    assert jain(fq) > 0.95
    assert sum(ceb) > 0.9 * 100e6


def test_twoclass_splits_the_port_between_classes():
    flows = '[[flows]]\ncca = "cubic"\ncount = 2\n[[flows]]\ncca = "reno"\nqueue_class = 1\n'
    shares = {}
    for kind in ("fifo", "twoclass"):
        (run, res), = run_text(study(f'rate = "100Mbit"\ndelay = "8ms"\nqdisc = "{kind}"', flows,
                                     senders='1\naccess = { rate = "10Gbit", delay = "1ms" }'))
        g = [goodput_between(res, i, 10, 30) for i in range(3)]
        shares[kind] = g[2] / sum(g)
    # One flow alone in class 1 gets half the port against two CUBIC flows in class 0;
    # on a FIFO it gets well under that (the kernel behind the emulator, same study, three
    # 30 s runs: the Reno flow's median 36.0 Mbit/s against 30.2 per CUBIC flow, a share of 0.37).
    assert abs(shares["twoclass"] - 0.5) < 0.03, shares
    assert shares["fifo"] < 0.45, shares
