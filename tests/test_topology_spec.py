"""General topologies in study files: resolution to the run config's network,
paths, events and controller, sweeps over links, and the study errors of a
bad topology (ccbench.spec.network)."""

from __future__ import annotations

import pytest

from ccbench.errors import StudyError
from ccbench.spec import parse_study

# a ── r1 ══ primary (10 ms) ══ r2 ── b
#        ╲                    ╱
#         r3 ── alt (15 ms) ─╯       r1-r3 2 ms
NET = """
[study]
name = "net"
duration = "10s"

[topology]
hosts = ["a", "b", "c"]
routers = ["r1", "r2", "r3"]

[[topology.links]]
between = ["a", "r1"]
rate = "1Gbit"
delay = "1ms"

[[topology.links]]
between = ["c", "r1"]
rate = "1Gbit"

[[topology.links]]
name = "primary"
between = ["r1", "r2"]
rate = "100Mbit"
delay = "10ms"

[[topology.links]]
between = ["r1", "r3"]
rate = "100Mbit"
delay = "2ms"

[[topology.links]]
name = "alt"
between = ["r3", "r2"]
rate = "100Mbit"
delay = "15ms"

[[topology.links]]
between = ["r2", "b"]
rate = "1Gbit"
delay = "1ms"
"""

FLOW = """
[[flows]]
cca = "cubic"
src = "a"
dst = "b"
"""


def study(text: str, **kw):
    return parse_study(text, filename="net.toml", **kw)


def config(text: str) -> dict:
    return study(text).runs()[0].config


def err(text: str) -> str:
    with pytest.raises(StudyError) as ei:
        study(text)
    msg = str(ei.value)
    assert msg.startswith("net.toml: ") and "\n" not in msg and "Traceback" not in msg, msg
    return msg


def links(cfg: dict) -> dict:
    return {ln["name"]: ln for ln in cfg["network"]["links"]}


# -- resolution --------------------------------------------------------------------------------


def test_a_general_topology_resolves_to_a_network():
    cfg = config(NET + FLOW)
    assert "senders" not in cfg and "bottleneck" not in cfg and "reverse" not in cfg
    assert "events" not in cfg and "controller" not in cfg
    net = cfg["network"]
    assert net["nodes"][:3] == [{"name": n, "kind": "host"} for n in ("a", "b", "c")]
    assert [n["kind"] for n in net["nodes"][3:]] == ["router"] * 3
    # each link's A → B direction, then its B → A direction, in file order
    assert [ln["name"] for ln in net["links"]] == [
        "a-r1", "r1-a", "c-r1", "r1-c", "primary", "primary/back", "r1-r3", "r3-r1", "alt", "alt/back",
        "r2-b", "b-r2"]
    ls = links(cfg)
    assert ls["primary"]["from"] == "r1" and ls["primary"]["to"] == "r2"
    assert ls["primary/back"]["from"] == "r2" and ls["primary/back"]["delay_ns"] == 10_000_000
    flow = cfg["flows"][0]
    assert flow["src"] == "a" and flow["dst"] == "b" and "sender" not in flow
    # shortest by delay: primary (10 ms) beats r3 + alt (17 ms)
    assert flow["path"] == ["a-r1", "primary", "r2-b"]
    assert flow["return_path"] == ["b-r2", "primary/back", "r1-a"]


def test_buffers_default_to_pipes_at_hosts_and_one_bdp_elsewhere():
    ls = links(config(NET + FLOW))
    for name in ("a-r1", "r1-a", "r2-b", "b-r2", "c-r1"):
        assert ls[name]["buffer_bytes"] is None and ls[name]["buffer_pkts"] is None, name
        assert "qdisc" not in ls[name]
    # the flow's base RTT over primary: 2 × (1 + 10 + 1) ms = 24 ms → 100 Mbit/s × 24 ms = 300 KB
    assert ls["primary"]["buffer_bytes"] == 300_000 and ls["primary"]["qdisc"] == {"kind": "fifo"}
    assert ls["primary/back"]["buffer_bytes"] == 300_000
    # no flow crosses alt: twice its own delay, 30 ms
    assert ls["alt"]["buffer_bytes"] == 375_000


def test_a_host_link_with_a_buffer_or_qdisc_queues():
    text = NET.replace('between = ["a", "r1"]\nrate = "1Gbit"', 'between = ["a", "r1"]\nrate = "1Gbit"\n'
                       'buffer = "100pkt"\nback = { qdisc = "fq" }')
    ls = links(config(text + FLOW))
    assert ls["a-r1"]["buffer_pkts"] == 100 and ls["a-r1"]["qdisc"] == {"kind": "fifo"}
    assert ls["r1-a"]["buffer_pkts"] == 100 and ls["r1-a"]["qdisc"]["kind"] == "fq"


def test_back_overrides_one_direction():
    text = NET.replace('name = "primary"\nbetween = ["r1", "r2"]\nrate = "100Mbit"\ndelay = "10ms"',
                       'name = "primary"\nbetween = ["r1", "r2"]\nrate = "100Mbit"\ndelay = "10ms"\n'
                       'loss = "1%"\nqdisc = "fq_codel"\nback = { rate = "10Mbit", loss = "0%", buffer = "50pkt" }')
    ls = links(config(text + FLOW))
    assert ls["primary"]["rate_bps"] == 100_000_000 and ls["primary"]["loss"] == pytest.approx(0.01)
    assert ls["primary"]["buffer_pkts"] == 10240  # fq_codel's Linux limit
    back = ls["primary/back"]
    assert back["rate_bps"] == 10_000_000 and back["loss"] == 0.0 and back["buffer_pkts"] == 50
    assert back["qdisc"]["kind"] == "fq_codel" and back["delay_ns"] == 10_000_000


def test_jitter_per_direction_and_only_where_given():
    text = NET.replace('name = "primary"\nbetween = ["r1", "r2"]\nrate = "100Mbit"\ndelay = "10ms"',
                       'name = "primary"\nbetween = ["r1", "r2"]\nrate = "100Mbit"\ndelay = "10ms"\n'
                       'jitter = "200us"\nback = { jitter = "0ms" }')
    text = text.replace('between = ["a", "r1"]\nrate = "1Gbit"', 'between = ["a", "r1"]\nrate = "1Gbit"\njitter = "50us"')
    ls = links(config(text + FLOW))
    assert ls["primary"]["jitter_ns"] == 200_000 and "jitter_ns" not in ls["primary/back"]
    # a host's pipe may have jitter too, both directions unless back says otherwise
    assert ls["a-r1"]["jitter_ns"] == ls["r1-a"]["jitter_ns"] == 50_000
    assert all("jitter_ns" not in ln for name, ln in ls.items() if name not in ("primary", "a-r1", "r1-a"))
    msg = err(NET.replace('delay = "15ms"', 'delay = "15ms"\njitter = "-1ms"') + FLOW)
    assert "net.toml: topology.links.4.jitter: " in msg and "must not be negative" in msg and "got '-1ms'" in msg
    # bounded, in the direction tables too, each saying what it defaults to
    msg = err(NET.replace('delay = "15ms"', 'delay = "15ms"\njitter = "11s"') + FLOW)
    assert "topology.links.4.jitter: out of range (got '11s'" in msg and "from '0ms' to '10s'" in msg
    msg = err(NET.replace('delay = "15ms"', 'delay = "15ms"\nback = { jitter = "1min" }') + FLOW)
    assert "topology.links.4.back.jitter: out of range (got '1min'" in msg and "the A → B direction's" in msg


def test_stalls_per_direction_and_only_where_given():
    text = NET.replace('name = "primary"\nbetween = ["r1", "r2"]\nrate = "100Mbit"\ndelay = "10ms"',
                       'name = "primary"\nbetween = ["r1", "r2"]\nrate = "100Mbit"\ndelay = "10ms"\n'
                       'stalls = { every = "40ms", length = "2ms" }')
    text = text.replace('between = ["a", "r1"]\nrate = "1Gbit"',
                        'between = ["a", "r1"]\nrate = "1Gbit"\nstalls = { every = "20ms", length = "1ms" }\n'
                        'back = { stalls = { every = "30ms", length = "3ms" } }')
    ls = links(config(text + FLOW))
    # both directions unless back says otherwise
    assert (ls["primary"]["stall_every_ns"], ls["primary"]["stall_ns"]) == (40_000_000, 2_000_000)
    assert (ls["primary/back"]["stall_every_ns"], ls["primary/back"]["stall_ns"]) == (40_000_000, 2_000_000)
    assert (ls["a-r1"]["stall_every_ns"], ls["a-r1"]["stall_ns"]) == (20_000_000, 1_000_000)
    assert (ls["r1-a"]["stall_every_ns"], ls["r1-a"]["stall_ns"]) == (30_000_000, 3_000_000)
    assert all("stall_ns" not in ln for name, ln in ls.items() if name not in ("primary", "primary/back", "a-r1", "r1-a"))
    msg = err(NET.replace('delay = "15ms"', 'delay = "15ms"\nstalls = { every = "1ms", length = "20s" }') + FLOW)
    assert "net.toml: topology.links.4.stalls.length: out of range (got '20s'" in msg, msg
    msg = err(NET.replace('delay = "15ms"', 'delay = "15ms"\nback = { stalls = { every = "10us", length = "1ms" } }')
              + FLOW)
    assert "topology.links.4.back.stalls.every: out of range (got '10us'" in msg, msg


def test_explicit_paths_and_transfers():
    text = NET + FLOW.replace('dst = "b"', 'dst = "b"\nkind = "transfer"\nsize = "1GB"\n'
                                           'path = ["a", "r1", "r3", "r2", "b"]')
    cfg = config(text)
    f = cfg["flows"][0]
    assert f["kind"] == "transfer" and f["size_bytes"] == 1_000_000_000
    assert f["path"] == ["a-r1", "r1-r3", "alt", "r2-b"]
    assert f["return_path"] == ["b-r2", "alt/back", "r3-r1", "r1-a"]
    meta = study(text).runs()[0].flow_meta[0]
    assert meta["group"] == "cubic transfer 1GB" and meta["src"] == "a" and meta["sender"] == 0
    # an asymmetric return path
    text = NET + FLOW + 'return_path = ["b", "r2", "r3", "r1", "a"]\n'
    f = config(text)["flows"][0]
    assert f["path"] == ["a-r1", "primary", "r2-b"] and f["return_path"] == ["b-r2", "alt/back", "r3-r1", "r1-a"]


def test_shortest_path_ties_are_broken_by_hops_then_names():
    # make the detour exactly as long as primary (2 + 8 = 10 ms): fewer hops wins
    text = NET.replace('name = "alt"\nbetween = ["r3", "r2"]\nrate = "100Mbit"\ndelay = "15ms"',
                       'name = "alt"\nbetween = ["r3", "r2"]\nrate = "100Mbit"\ndelay = "8ms"')
    assert config(text + FLOW)["flows"][0]["path"] == ["a-r1", "primary", "r2-b"]
    # two routes of equal delay and hops: the alphabetically first node sequence
    square = """
[study]
name = "sq"
[topology]
hosts = ["a", "b"]
routers = ["x", "m", "z"]
[[topology.links]]
between = ["a", "x"]
rate = "1Gbit"
[[topology.links]]
between = ["x", "z"]
rate = "1Gbit"
delay = "1ms"
[[topology.links]]
between = ["x", "m"]
rate = "1Gbit"
delay = "1ms"
[[topology.links]]
between = ["z", "b"]
rate = "1Gbit"
delay = "1ms"
[[topology.links]]
between = ["m", "b"]
rate = "1Gbit"
delay = "1ms"
[[flows]]
cca = "reno"
src = "a"
dst = "b"
"""
    assert config(square)["flows"][0]["path"] == ["a-x", "x-m", "m-b"]


def test_hosts_do_not_forward():
    # c's only link is to r1; a path a → c → ... does not exist, and b is reached through routers
    text = NET + FLOW.replace('dst = "b"', 'dst = "c"')
    assert config(text)["flows"][0]["path"] == ["a-r1", "r1-c"]


def test_sweep_over_a_named_link():
    text = NET + FLOW + '[sweep]\n"topology.links.primary.rate" = ["100Mbit", "1Gbit"]\n' \
                        '"topology.links.r1-r3.delay" = ["2ms", "20ms"]\n'
    runs = study(text).runs()
    assert [r.params for r in runs] == [
        {"topology.links.primary.rate": a, "topology.links.r1-r3.delay": b}
        for a in ("100Mbit", "1Gbit") for b in ("2ms", "20ms")]
    assert [links(r.config)["primary"]["rate_bps"] for r in runs] == [10**8, 10**8, 10**9, 10**9]
    assert [links(r.config)["r3-r1"]["delay_ns"] for r in runs] == [2_000_000, 20_000_000] * 2
    assert len({r.run_id for r in runs}) == 4
    # cases and profiles take the same paths
    text = NET + FLOW + '[sweep.cases.q]\nfifo = {}\nfq = { "topology.links.primary.qdisc" = "fq" }\n' \
                        '[profiles.quick]\n"topology.links.alt.rate" = "1Gbit"\n'
    runs = study(text, profile="quick").runs()
    assert [links(r.config)["primary"]["qdisc"]["kind"] for r in runs] == ["fifo", "fq"]
    assert links(runs[0].config)["alt"]["rate_bps"] == 10**9


def test_sweep_over_an_unknown_link_names_the_links():
    msg = err(NET + FLOW + '[sweep]\n"topology.links.primry.rate" = ["1Gbit"]\n')
    assert 'sweep."topology.links.primry.rate"' in msg and "no entry named 'primry'" in msg
    assert "topology.links.primary" in msg


def test_route_events_resolve_per_flow():
    text = NET + FLOW + FLOW.replace('src = "a"', 'src = "c"') + """
[[events]]
at = "4s"
flows = "cubic bulk"
path = ["r1", "r3", "r2"]

[[events]]
at = "2s"
flows = [0]
path = ["a", "r1", "r3", "r2", "b"]
"""
    cfg = config(text)
    ev = cfg["events"]
    assert [e["at_ns"] for e in ev] == [2_000_000_000, 4_000_000_000, 4_000_000_000]
    assert ev[0] == {"at_ns": 2_000_000_000, "flows": [0], "path": ["a-r1", "r1-r3", "alt", "r2-b"],
                     "return_path": ["b-r2", "alt/back", "r3-r1", "r1-a"]}
    # at 4 s both flows move; flow 0 is already there (same path), flow 1 from c
    assert ev[1]["flows"] == [0] and ev[2]["flows"] == [1]
    assert ev[2]["path"] == ["c-r1", "r1-r3", "alt", "r2-b"]


def test_controller_alternatives_per_candidate_flow():
    text = NET + FLOW.replace('dst = "b"', 'dst = "b"\nkind = "transfer"\nsize = "500MB"\ncount = 2') \
        + FLOW.replace('src = "a"', 'src = "c"\nkind = "rpc"') + """
[controller]
kind = "noted"
link = "primary"
threshold = "95%"
hold = "1s"
alternative = ["r1", "r3", "r2"]
"""
    c = config(text)["controller"]
    assert c["kind"] == "noted" and c["link"] == "primary"
    assert c["threshold"] == pytest.approx(0.95) and c["hold_ns"] == 1_000_000_000
    assert c["release_threshold"] == pytest.approx(0.7) and c["release_hold_ns"] == 2_000_000_000
    assert c["min_bytes"] == 100_000_000 and c["min_rate_bps"] == 0
    # the two transfers move; the rpc flow does not
    assert [a["flow"] for a in c["alternatives"]] == [0, 1]
    assert c["alternatives"][0]["path"] == ["a-r1", "r1-r3", "alt", "r2-b"]
    assert c["alternatives"][0]["return_path"] == ["b-r2", "alt/back", "r3-r1", "r1-a"]
    # the alternative's links get buffers for the moved flows' RTT: 2 × (1 + 2 + 15 + 1) ms = 38 ms
    assert links(config(text))["alt"]["buffer_bytes"] == 475_000


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize("change, field, fragment", [
    # a path through a link that does not exist
    (('dst = "b"', 'dst = "b"\npath = ["a", "r1", "b"]'), "flows.0.path", "no link between r1 and b"),
    # a cycle in an explicit path
    (('dst = "b"', 'dst = "b"\npath = ["a", "r1", "r3", "r1", "r2", "b"]'), "flows.0.path", "visits r1 twice"),
    (('dst = "b"', 'dst = "b"\npath = ["a", "r1", "r9", "b"]'), "flows.0.path", "unknown node 'r9'"),
    (('dst = "b"', 'dst = "b"\npath = ["r1", "r2", "b"]'), "flows.0.path", "must go from a to b"),
    (('dst = "b"', 'dst = "b"\nreturn_path = ["b", "r2", "a"]'), "flows.0.return_path", "no link between r2 and a"),
    (('src = "a"', 'src = "x"'), "flows.0.src", "unknown host 'x'"),
    (('dst = "b"', 'dst = "r2"'), "flows.0.dst", "r2 is a router"),
    (('dst = "b"', 'dst = "a"'), "flows.0.dst", "must not be the flow's src"),
    (('src = "a"', 'src = "a"\nsender = 1'), "flows.0.sender", "use src and dst"),
    (('dst = "b"', 'dst = "b"\nkind = "transfer"'), "flows.0.size", "a transfer needs its size"),
    (('dst = "b"', 'dst = "b"\nsize = "1GB"'), "flows.0.size", "only allowed for kind = 'transfer'"),
    (('dst = "b"', 'dst = "b"\nkind = "transfer"\nsize = "1GB"\nstop = "5s"'), "flows.0.stop",
     "a transfer ends when its size has been delivered"),
])
def test_bad_flow_paths_are_study_errors(change, field, fragment):
    old, new = change
    msg = err(NET + FLOW.replace(old, new, 1))
    assert f"net.toml: {field}: " in msg and fragment in msg, msg


def test_a_disconnected_flow_is_a_study_error():
    text = NET.replace('hosts = ["a", "b", "c"]', 'hosts = ["a", "b", "c", "d", "e"]') + """
[[topology.links]]
between = ["d", "e"]
rate = "1Gbit"
""" + FLOW.replace('dst = "b"', 'dst = "d"')
    msg = err(text)
    assert "net.toml: flows.0.dst: no path from a to d" in msg and "got 'd'" in msg


@pytest.mark.parametrize("extra, field, fragment", [
    # a link given twice with two different rates for one direction
    ('[[topology.links]]\nbetween = ["r2", "r1"]\nrate = "50Mbit"\n', "topology.links.6.rate",
     "given twice (also topology.links.2) with different rates for r2 → r1 (100Mbit and 50Mbit)"),
    ('[[topology.links]]\nbetween = ["r1", "r2"]\nrate = "100Mbit"\nback = { rate = "1Gbit" }\n',
     "topology.links.6.back.rate", "with different rates for r2 → r1"),
    ('[[topology.links]]\nbetween = ["r2", "r1"]\nrate = "100Mbit"\n', "topology.links.6.between",
     "given twice (also topology.links.2)"),
    # unknown node names
    ('[[topology.links]]\nbetween = ["r2", "q"]\nrate = "1Gbit"\n', "topology.links.6.between.1",
     "unknown node 'q'"),
    ('[[topology.links]]\nbetween = ["r2", "r2"]\nrate = "1Gbit"\n', "topology.links.6.between",
     "two different nodes"),
    ('[[topology.links]]\nname = "primary"\nbetween = ["a", "r2"]\nrate = "1Gbit"\n', "topology.links.6.name",
     "link name 'primary' is taken by topology.links.2"),
    ('[[topology.links]]\nname = "p/q"\nbetween = ["a", "r2"]\nrate = "1Gbit"\n', "topology.links.6.name",
     "not a valid link name"),
])
def test_bad_links_are_study_errors(extra, field, fragment):
    msg = err(NET + extra + FLOW)
    assert f"net.toml: {field}: " in msg and fragment in msg, msg


@pytest.mark.parametrize("old, new, field, fragment", [
    ('routers = ["r1", "r2", "r3"]', 'routers = ["r1", "r2", "r3", "a"]', "topology.routers.3",
     "node 'a' is named twice"),
    ('routers = ["r1", "r2", "r3"]', 'routers = ["r1", "r2", "r3", "r4"]', "topology.routers.3",
     "node 'r4' has no link"),
    ('hosts = ["a", "b", "c"]', 'hosts = ["a", "b c", "c"]', "topology.hosts.1", "not a valid node name"),
    ('hosts = ["a", "b", "c"]', 'hosts = []', "topology.hosts", "needs its hosts"),
    ('hosts = ["a", "b", "c"]', 'hosts = ["a", "b", "c"]\nsenders = 2', "topology.senders",
     "not part of a general topology"),
])
def test_bad_nodes_are_study_errors(old, new, field, fragment):
    msg = err(NET.replace(old, new) + FLOW)
    assert f"net.toml: {field}: " in msg and fragment in msg, msg


@pytest.mark.parametrize("event, field, fragment", [
    ('at = "2s"\nflows = "nope"\npath = ["r1", "r3", "r2"]', "events.0.flows", "no flow group 'nope'"),
    ('at = "2s"\nflows = [3]\npath = ["r1", "r3", "r2"]', "events.0.flows", "no flow 3: the study has 1 flow"),
    ('at = "20s"\nflows = [0]\npath = ["r1", "r3", "r2"]', "events.0.at", "before the end of the run"),
    ('at = "2s"\nflows = [0]\npath = ["r3", "r2"]', "events.0.path", "does not go from r3 to r2"),
    ('at = "2s"\nflows = [0]\npath = ["r1", "r2", "r3"]', "events.0.path", "does not go from r1 to r3"),
    ('at = "2s"\nflows = [0]\npath = ["r1", "r3", "r1", "r2"]', "events.0.path", "visits r1 twice"),
    ('at = "2s"\nflows = [0]\npath = ["r1", "r4", "r2"]', "events.0.path", "unknown node 'r4'"),
])
def test_bad_events_are_study_errors(event, field, fragment):
    msg = err(NET + FLOW + "[[events]]\n" + event + "\n")
    assert f"net.toml: {field}: " in msg and fragment in msg, msg


@pytest.mark.parametrize("controller, field, fragment", [
    ('link = "primery"', "controller.link", "unknown link 'primery'"),
    ('link = "primary"\nrelease_threshold = "95%"', "controller.release_threshold", "must not be above threshold"),
    ('link = "alt"', "controller.alternative", "no bulk or transfer flow crosses alt"),
    ('link = "primary"\nflows = "nope"', "controller.flows", "no flow group 'nope'"),
])
def test_bad_controllers_are_study_errors(controller, field, fragment):
    text = NET + FLOW + '[controller]\nkind = "noted"\nalternative = ["r1", "r3", "r2"]\n' + controller + "\n"
    msg = err(text)
    assert f"net.toml: {field}: " in msg and fragment in msg, msg


def test_the_controller_alternative_must_avoid_the_watched_link():
    text = NET + FLOW + '[controller]\nkind = "noted"\nlink = "r2-b"\nalternative = ["r1", "r3", "r2"]\n'
    msg = err(text)
    assert "controller.alternative: flow 0's alternative path still crosses the watched link r2-b" in msg


DUMBBELL = """
[study]
name = "d"
[topology.bottleneck]
rate = "100Mbit"
delay = "10ms"
[[flows]]
cca = "cubic"
"""


@pytest.mark.parametrize("extra, field, fragment", [
    ('src = "a"\n', "flows.0.src", "only with a general topology"),
    ('[[events]]\nat = "1s"\nflows = [0]\npath = ["a", "b"]\n', "events", "route changes need a general topology"),
    ('[controller]\nkind = "noted"\nlink = "bottleneck"\nalternative = ["a", "b"]\n', "controller",
     "needs a general topology"),
])
def test_general_fields_on_a_dumbbell_are_study_errors(extra, field, fragment):
    with pytest.raises(StudyError) as ei:
        parse_study(DUMBBELL + extra, filename="net.toml")
    assert f"net.toml: {field}: " in str(ei.value) and fragment in str(ei.value)


def test_a_dumbbell_without_bottleneck_still_says_so():
    with pytest.raises(StudyError) as ei:
        parse_study('[study]\nname = "d"\n[topology]\nsenders = 2\n[[flows]]\ncca = "cubic"\n', filename="net.toml")
    assert str(ei.value) == ("net.toml: topology.bottleneck: required field is missing "
                             "(allowed: a table with at least rate = '...')")


def test_a_zero_rtt_router_link_asks_for_its_delay_or_bdp_rtt():
    text = NET.replace('between = ["r1", "r3"]\nrate = "100Mbit"\ndelay = "2ms"',
                       'between = ["r1", "r3"]\nrate = "100Mbit"') + FLOW.replace('dst = "b"', 'dst = "c"')
    text = text.replace('name = "alt"\nbetween = ["r3", "r2"]\nrate = "100Mbit"\ndelay = "15ms"',
                        'name = "alt"\nbetween = ["r3", "r2"]\nrate = "100Mbit"\ndelay = "15ms"\nbuffer = "1MB"')
    msg = err(text)
    assert "topology.links.3.buffer: a buffer in BDP needs a non-zero RTT" in msg
    assert "set topology.links.3.delay or topology.links.3.bdp_rtt" in msg


def test_a_transfer_on_the_dumbbell():
    cfg = parse_study(DUMBBELL + 'kind = "transfer"\nsize = "10MB"\n').runs()[0].config
    assert cfg["flows"][0]["size_bytes"] == 10_000_000 and cfg["flows"][0]["sender"] == 0


def test_the_examples_of_the_docs_validate():
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    text = (repo / "docs" / "topology.md").read_text()
    example = text[text.index("```toml\n[study]") + len("```toml\n"):]
    example = example[:example.index("```")]
    runs = study(example).runs()
    assert len(runs) == 4 and {r.params["controller.enabled"] for r in runs} == {"true", "false"}
    assert sum("controller" in r.config for r in runs) == 2


# -- pipes, link names, selectors (study errors before any run) --------------------------------


@pytest.mark.parametrize("old, new, field, fragment", [
    ('rate = "1Gbit"\ndelay = "1ms"', 'rate = "1Gbit"\ndelay = "1ms"\nloss = "1%"', "topology.links.0.loss",
     "a-r1 is a pipe"),
    ('rate = "1Gbit"\ndelay = "1ms"', 'rate = "1Gbit"\ndelay = "1ms"\nback = { loss = "1%" }',
     "topology.links.0.back.loss", "r1-a is a pipe"),
    # a pipe's own loss in its back table, beside a forward direction that queues
    ('rate = "1Gbit"\ndelay = "1ms"', 'rate = "1Gbit"\ndelay = "1ms"\nbuffer = "10pkt"\n'
     'back = { loss = "1%", buffer = "10pkt" }', None, None),
])
def test_loss_on_a_pipe_is_a_study_error(old, new, field, fragment):
    if field is None:  # not a pipe after all: the back table's buffer makes it queue
        assert links(config(NET.replace(old, new, 1) + FLOW))["r1-a"]["loss"] == pytest.approx(0.01)
        return
    msg = err(NET.replace(old, new, 1) + FLOW)
    assert f"net.toml: {field}: {fragment}" in msg and "cannot lose packets (got '1%'; allowed: '0%'" in msg, msg


def test_loss_on_a_host_link_that_queues_is_fine():
    cfg = config(NET.replace('rate = "1Gbit"\ndelay = "1ms"', 'rate = "1Gbit"\ndelay = "1ms"\nloss = "1%"\n'
                             'buffer = "100pkt"', 1) + FLOW)
    assert links(cfg)["a-r1"]["loss"] == pytest.approx(0.01) and links(cfg)["r1-a"]["loss"] == pytest.approx(0.01)


def test_a_links_loss_is_its_queueing_directions_only():
    """A host's link with a buffer for its back direction only: its loss is
    that direction's; A → B stays a pipe and loses nothing (docs/topology.md)."""
    cfg = config(NET.replace('rate = "1Gbit"\ndelay = "1ms"', 'rate = "1Gbit"\ndelay = "1ms"\nloss = "1%"\n'
                             'back = { buffer = "10pkt" }', 1) + FLOW)
    assert links(cfg)["a-r1"]["loss"] == 0 and links(cfg)["r1-a"]["loss"] == pytest.approx(0.01)
    # the wildcard reaches it too (it failed on its pipe direction), in a case and in a profile
    text = NET.replace('rate = "1Gbit"\ndelay = "1ms"', 'rate = "1Gbit"\ndelay = "1ms"\nback = { buffer = "10pkt" }',
                       1) + FLOW
    runs = study(text + '[sweep.cases.loss]\nclean = {}\nlossy = { "topology.links.*.loss" = "1%" }\n').runs()
    assert links(runs[1].config)["r1-a"]["loss"] == pytest.approx(0.01) and links(runs[1].config)["a-r1"]["loss"] == 0
    (run,) = study(text + '[profiles.lossy]\n"topology.links.*.loss" = "1%"\n').runs()
    assert links(run.config)["r1-a"]["loss"] == 0  # the profile is not chosen; the file still loads
    # the back table's own loss: the link's then reaches only the pipe, an error (it was dropped silently)
    msg = err(NET.replace('rate = "1Gbit"\ndelay = "1ms"', 'rate = "1Gbit"\ndelay = "1ms"\nloss = "3%"\n'
                          'back = { buffer = "10pkt", loss = "0%" }', 1) + FLOW)
    assert "net.toml: topology.links.0.loss: a-r1 is a pipe" in msg and "cannot lose packets (the link's loss would " \
        "go to r1-a, which queues, but its back table sets its own) (got '3%'" in msg, msg


def test_a_wildcard_loss_leaves_out_the_pipes():
    """`topology.links.*.loss` reaches the links that can lose packets; a
    host's link that the same case gives a buffer is one of them."""
    text = NET + FLOW + """
[sweep.cases.loss]
clean = {}
lossy = { "topology.links.*.loss" = "1%" }
buffered = { "topology.links.*.loss" = "2%", "topology.links.a-r1.buffer" = "100pkt" }
"""
    runs = study(text).runs()
    lossy = {n for n, ln in links(runs[1].config).items() if ln["loss"]}
    assert lossy == {"primary", "primary/back", "r1-r3", "r3-r1", "alt", "alt/back"}
    assert {n for n, ln in links(runs[2].config).items() if ln["loss"]} == lossy | {"a-r1", "r1-a"}
    # the clean case is the file as written
    assert runs[0].config == config(NET + FLOW)


def test_a_wildcard_loss_on_a_network_of_pipes_is_a_study_error():
    text = """
[study]
name = "net"
[topology]
hosts = ["a", "b"]
[[topology.links]]
between = ["a", "b"]
rate = "1Gbit"
""" + FLOW + '[profiles.lossy]\n"topology.links.*.loss" = "1%"\n'
    msg = err(text)
    assert 'net.toml: profiles.lossy."topology.links.*.loss": every link is a pipe' in msg, msg
    assert "got" not in msg, msg  # the key is the field already, not a value it got


def test_an_all_digit_link_name_is_a_study_error():
    # "topology.links.3.rate" would sweep link index 3, not the link named "3"
    msg = err(NET.replace('name = "alt"', 'name = "3"') + FLOW)
    assert "net.toml: topology.links.4.name: an all-digit link name reads as a link index" in msg, msg
    assert "got '3'" in msg and "not all digits" in msg


@pytest.mark.parametrize("flows", ["3.5", "[3.5]", "{ group = 'x' }"])
def test_a_flow_selector_of_the_wrong_type_names_the_field_and_the_forms(flows):
    msg = err(NET + FLOW + f'[[events]]\nat = "2s"\nflows = {flows}\npath = ["r1", "r3", "r2"]\n')
    assert "net.toml: events.0.flows: must be a group label or an array of group labels and flow numbers" in msg
    assert "allowed: a flow group label" in msg and "[sweep]" not in msg, msg


def test_a_one_node_controller_alternative_is_a_path_error():
    msg = err(NET + FLOW + '[controller]\nkind = "noted"\nlink = "primary"\nalternative = ["r1"]\n')
    assert "net.toml: controller.alternative: a path has at least two nodes (got ['r1']" in msg, msg
    assert "empty" not in msg and "[sweep]" not in msg


@pytest.mark.parametrize("extra, flows, fragment", [
    # an rpc flow named by its group
    ('kind = "rpc"\ngroup = "rpcs"', '[0, "rpcs"]', "no flow of group 'rpcs' can move: flow 1 is an rpc flow"),
    # a flow that goes round the watched link from the start
    ('path = ["c", "r1", "r3", "r2", "b"]', "[0, 1]",
     "flow 1 (group 'cubic bulk') does not cross primary at the start (its path: c → r1 → r3 → r2 → b)"),
])
def test_a_controller_flow_that_cannot_move_is_a_study_error(extra, flows, fragment):
    text = NET + FLOW + FLOW.replace('src = "a"', 'src = "c"\n' + extra) \
        + f'[controller]\nkind = "noted"\nlink = "primary"\nalternative = ["r1", "r3", "r2"]\nflows = {flows}\n'
    msg = err(text)
    assert f"net.toml: controller.flows: {fragment}" in msg, msg


def test_a_controller_group_names_those_of_its_flows_that_can_move():
    # both flows are 'cubic bulk'; the one that goes round the watched link is left out
    text = NET + FLOW + FLOW.replace('src = "a"', 'src = "c"\npath = ["c", "r1", "r3", "r2", "b"]') \
        + '[controller]\nkind = "noted"\nlink = "primary"\nalternative = ["r1", "r3", "r2"]\nflows = "cubic bulk"\n'
    assert [a["flow"] for a in config(text)["controller"]["alternatives"]] == [0]


def test_a_controller_error_of_one_case_names_the_case():
    text = NET + FLOW + """
[controller]
kind = "noted"
link = "primary"
alternative = ["r1", "r3", "r2"]

[sweep.cases.route]
direct = {}
via = { "flows.0.path" = ["a", "r1", "r3", "r2", "b"] }
"""
    msg = err(text)
    assert "net.toml: controller.alternative: no bulk or transfer flow crosses primary" in msg, msg
    assert "[with sweep cases.route = 'via']" in msg


def test_controller_thresholds_and_a_min_size_no_candidate_reaches():
    """threshold is a share of the link's rate, at most what a full link reads steadily;
    a min_size above every candidate transfer's size could never be met: the
    controller would sit in decision for the whole run."""
    base = NET + FLOW.replace('dst = "b"', 'dst = "b"\nkind = "transfer"\nsize = "200MB"') \
        + '[controller]\nkind = "noted"\nlink = "primary"\nalternative = ["r1", "r3", "r2"]\n'
    # a full link reads 100 % only to within a packet per sample (0.998, then 1.001): the primary's
    # 100 Mbit/s over 100 ms samples takes at most 100 % - 2 × 1500 B × 8 / 10 Mbit = 99.76 %
    msg = err(base + 'threshold = "100%"\n')
    assert ("controller.threshold: a full primary reads 100 % only to within a packet per sample interval (100ms at "
            "100Mbit): above 99.76% the controller would see it saturated only now and then, and it would never act "
            "(got '100%'; allowed: at most 99.76%)") in msg, msg
    msg = err(base + 'threshold = "99.9%"\n')
    assert "(got '99.9%'; allowed: at most 99.76%, or a study.sample_interval of at least 240ms)" in msg, msg
    # a slow link: no threshold works at this sample interval; the error says which interval would
    msg = err(base.replace('rate = "100Mbit"', 'rate = "100kbit"', 1) + 'threshold = "50%"\n')
    assert ("a sample holds under two full-sized packets, so no threshold works, and it would never act (got '50%'; "
            "allowed: a study.sample_interval of at least 480ms)") in msg, msg
    assert config(base + 'threshold = "99.7%"\n')["controller"]["threshold"] == pytest.approx(0.997)
    for value, fragment in (('"0%"', "must be above 0%"), ('"101%"', "must be at most 100%")):
        msg = err(base + f"threshold = {value}\n")
        assert "net.toml: controller.threshold: " + fragment in msg and "a share of the link's rate" in msg, msg
    msg = err(base + 'min_size = "300MB"\n')
    assert ("net.toml: controller.min_size: no candidate transfer can ever have this much left to deliver, so the "
            "controller would never act (the largest, flow 0, is 200MB) (got '300MB'; allowed: at most 200MB)") in msg, msg
    assert config(base + 'min_size = "200MB"\n')["controller"]["min_bytes"] == 200_000_000
