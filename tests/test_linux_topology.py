"""The linux backend with a general network (docs/linux-backend.md,
"Networks"): real kernel TCP in a namespace per host, every link of the graph
emulated by ccbench's emulator, flows recognised by their ports, route
changes and the NOTED controller applied by the emulator at their times.

Needs root (as the other linux-backend tests). The configs are resolved run
configs written by hand (docs/interfaces.md §1, "General topologies"), so
these tests do not depend on the study syntax.
"""

from __future__ import annotations

import os
import statistics
import textwrap
from types import SimpleNamespace

import pytest

from ccbench.backends.linux import cleanup, netns
from ccbench.backends.linux.backend import LinuxBackend
from ccbench.errors import UsageError
from ccbench.spec import parse_study
from ccbench.store import Store

from root_checks import OURS, assert_nothing_left, need_linux_backend, record_run_tokens  # noqa: F401 (autouse)

MS = 1_000_000
S = 1_000_000_000


@pytest.fixture
def core():
    need_linux_backend()
    yield
    assert_nothing_left()


def tcp_defaults() -> dict:
    """The [tcp] table of a resolved config, as the spec fills it in."""
    s = parse_study(textwrap.dedent("""
        [study]
        name = "t"
        duration = "1s"
        [topology.bottleneck]
        rate = "10Mbit"
        delay = "1ms"
        [[flows]]
        cca = "cubic"
        """), filename="t.toml", backend="sim")
    return s.runs()[0].config["tcp"]


def link(name, frm, to, rate, delay_ms, buffer_pkts=None):
    d = {"name": name, "from": frm, "to": to, "rate_bps": rate, "delay_ns": int(delay_ms * MS), "loss": 0.0,
         "buffer_bytes": None, "buffer_pkts": buffer_pkts}
    if buffer_pkts is not None:
        d["qdisc"] = {"kind": "fifo"}
    return d


def both(name, a, b, rate, delay_ms, buffer_pkts=None):
    """Both directions of a link: NAME (a → b) and NAME/back."""
    return [link(name, a, b, rate, delay_ms, buffer_pkts), link(name + "/back", b, a, rate, delay_ms, buffer_pkts)]


def access(host, router):
    """A host's NIC both ways: pipes at 1 Gbit/s without delay."""
    return [link(f"{host}-{router}", host, router, 10**9, 0), link(f"{router}-{host}", router, host, 10**9, 0)]


def flow(i, src, dst, path, back, kind="bulk", cca="cubic", **kw):
    f = {"id": i, "cca": cca, "kind": kind, "src": src, "dst": dst, "path": path, "return_path": back,
         "start_ns": 0, "stop_ns": None}
    f.update(kw)
    return f


def runspec(hosts, routers, links, flows, duration_s, events=(), controller=None):
    cfg = {"seed": 7, "duration_ns": int(duration_s * S), "sample_interval_ns": 100 * MS, "tcp": tcp_defaults(),
           "network": {"nodes": [{"name": h, "kind": "host"} for h in hosts]
                       + [{"name": r, "kind": "router"} for r in routers], "links": links},
           "flows": flows, "events": list(events), "controller": controller}
    meta = [{"id": f["id"], "cca": f["cca"], "sender": None, "kind": f["kind"], "group": f"flow{f['id']}",
             "start_us": 0, "stop_us": None} for f in flows]
    return SimpleNamespace(run_id="r" + os.urandom(4).hex(), config_id="c", params={}, repetition=0, seed=7,
                           config=cfg, flow_meta=meta)


def rows(table: dict, **where) -> list[dict]:
    cols = list(table)
    out = [{c: table[c][i] for c in cols} for i in range(len(table[cols[0]]) if cols else 0)]
    return [r for r in out if all(r[k] == v for k, v in where.items())]


# Two sites: a - r1 = primary (10 ms) = r2 - b, and a detour r1 - r3 - r2 (2 x 15 ms).
TWO_PATHS = (["a", "b"], ["r1", "r2", "r3"],
             access("a", "r1") + access("b", "r2") + both("primary", "r1", "r2", 100_000_000, 10, 300)
             + both("alt1", "r1", "r3", 100_000_000, 15, 300) + both("alt2", "r3", "r2", 100_000_000, 15, 300))
PRIMARY = (["a-r1", "primary", "r2-b"], ["b-r2", "primary/back", "r1-a"])
DETOUR = (["a-r1", "alt1", "alt2", "r2-b"], ["b-r2", "alt2/back", "alt1/back", "r1-a"])


def test_route_change_moves_the_rtt_and_the_flows_keep_delivering(core, tmp_path):
    flows = [flow(0, "a", "b", *PRIMARY, kind="rpc", request_bytes=1000, response_bytes=100, think_ns=5 * MS),
             # Paced below the links' rate, so no queue hides the paths' round trips.
             flow(1, "a", "b", *PRIMARY, kind="bulk", max_rate_bps=50_000_000)]
    r = runspec(*TWO_PATHS, flows, 4.0,
                events=[{"at_ns": 2 * S, "flows": [0, 1], "path": DETOUR[0], "return_path": DETOUR[1]}])
    res = LinuxBackend().run(r)
    # RPC latency: at least one round trip of the path it is on (20 ms, then 60 ms).
    lat = [(s, x) for s, x in zip(res.rpcs["start_us"], res.rpcs["latency_us"])]
    before = [x for s, x in lat if 500_000 <= s < 1_900_000]
    after = [x for s, x in lat if 2_500_000 <= s]
    assert len(before) > 20 and len(after) > 10, (len(before), len(after))
    assert 20_000 <= min(before) <= 21_000, min(before)
    assert 60_000 <= min(after) <= 61_000, min(after)
    # The bulk flow kept delivering on the detour, at its paced rate.
    deliv = {t: b for f, t, b in zip(res.samples["flow_id"], res.samples["time_us"], res.samples["delivered_bytes"])
             if f == 1}
    rate_after = (deliv[4_000_000] - deliv[3_000_000]) * 8
    assert 40e6 < rate_after < 52e6, rate_after
    # The route event, and the links' rows: the primary link carried nothing after the change.
    (ev0, ev1) = rows(res.events)
    assert (ev0["time_us"], ev0["kind"], ev0["flow_id"], ev0["detail"]) == (2_000_000, "route", 0,
                                                                  f"path: {' '.join(DETOUR[0])}; return_path: {' '.join(DETOUR[1])}")
    assert ev1["flow_id"] == 1
    q = res.queue
    assert set(q["link"]) == {"primary", "primary/back", "alt1", "alt1/back", "alt2", "alt2/back"}
    prim = {x["time_us"]: x for x in rows(q, link="primary")}
    alt = {x["time_us"]: x for x in rows(q, link="alt2")}
    assert prim[1_500_000]["utilisation"] > 0.4 and alt[1_500_000]["tx_bytes"] < 10_000
    assert prim[3_500_000]["utilisation"] == 0 and alt[3_500_000]["utilisation"] > 0.4
    assert res.stats["emulator"]["forwarded_unclassified"] == 0
    # Into the store, as any run.
    with Store(tmp_path / "results") as st:
        st.write_run(study="topo", runspec=r, backend="linux", status=res.status, result=res)
        assert st.count("queue", r.run_id) == len(q["link"]) > 0
        assert st.count("flows", r.run_id) == 2


def test_parking_lot_transfers_complete(core):
    # a - r1 =L1= r2 =L2= r3 - c, and b at r2: flow 0 crosses both links, flow 1 L1, flow 2 L2.
    hosts, routers = ["a", "b", "c"], ["r1", "r2", "r3"]
    links = (access("a", "r1") + access("b", "r2") + access("c", "r3")
             + both("L1", "r1", "r2", 50_000_000, 5, 200) + both("L2", "r2", "r3", 50_000_000, 5, 200))
    flows = [
        flow(0, "a", "c", ["a-r1", "L1", "L2", "r3-c"], ["c-r3", "L2/back", "L1/back", "r1-a"], kind="transfer",
             size_bytes=4_000_000),
        flow(1, "a", "b", ["a-r1", "L1", "r2-b"], ["b-r2", "L1/back", "r1-a"], kind="transfer", size_bytes=2_000_000,
             start_ns=200 * MS),
        flow(2, "b", "c", ["b-r2", "L2", "r3-c"], ["c-r3", "L2/back", "r2-b"], kind="bulk"),
    ]
    # 6 s: on a FIFO the two-link flow gets well below its max-min share beside the
    # bulk flow (seen: 9.4 Mbit/s, so 4 MB took longer than a 3 s run).
    res = LinuxBackend().run(runspec(hosts, routers, links, flows, 6.0))
    f = {x["flow_id"]: x for x in res.flows}
    assert f[0]["bytes_delivered"] == 4_000_000 and f[1]["bytes_delivered"] == 2_000_000, res.flows
    # 4 MB over a share of 50 Mbit/s: between 0.64 s (the whole link) and the end of the run.
    c0, c1 = f[0]["completion_us"], f[1]["completion_us"]
    assert c0 is not None and 640_000 < c0 < 6_000_000, c0
    assert c1 is not None and 320_000 < c1 < 5_800_000, c1
    # Their goodput is over the time they were active: start to last byte.
    assert abs(f[0]["goodput_bps"] / (4_000_000 * 8 / (c0 / 1e6)) - 1) < 1e-6
    assert f[2]["completion_us"] is None and f[2]["bytes_delivered"] > 5_000_000
    # L2 carried flows 0 and 2, L1 flows 0 and 1.
    tx = {}
    for lk, b in zip(res.queue["link"], res.queue["tx_bytes"]):
        tx[lk] = max(tx.get(lk, 0), b)
    assert tx["L1"] > 6_000_000 and tx["L2"] > tx["L1"], tx
    assert res.stats["topology"]["hosts"][0]["node"] == "a"


def test_the_noted_controller_moves_transfers_off_the_saturated_link(core):
    flows = [flow(i, "a", "b", *PRIMARY, kind="transfer", size_bytes=60_000_000) for i in range(2)]
    ctl = {"kind": "noted", "link": "primary", "threshold": 0.8, "hold_ns": 500 * MS, "release_threshold": 0.3,
           "release_hold_ns": 500 * MS, "min_bytes": 1_000_000, "min_rate_bps": 0,
           "alternatives": [{"flow": i, "path": DETOUR[0], "return_path": DETOUR[1]} for i in range(2)]}
    res = LinuxBackend().run(runspec(*TWO_PATHS, flows, 3.0, controller=ctl))
    ev = rows(res.events, kind="controller")
    states = [(e["state"], e["flow_id"]) for e in ev]
    assert ("decision", None) in states and ("action", 0) in states and ("action", 1) in states, ev
    t_action = next(e["time_us"] for e in ev if e["flow_id"] == 0)
    t_decision = next(e["time_us"] for e in ev if e["state"] == "decision")
    assert t_action - t_decision >= 500_000
    # The link crossed the threshold where the controller said so.
    util = {x["time_us"]: x["utilisation"] for x in rows(res.queue, link="primary")}
    assert util[t_decision] >= 0.8
    # After the move the transfers are on the detour: nothing is left on
    # the primary, and the detour carries them. How fast two CUBIC flows
    # fill the longer path after the reordering of the move varies from
    # run to run (session 47, 18 runs of this case: the detour's mean
    # utilisation over the rest of the run 0.82-0.86 in 17, 0.63 in one
    # whose best 100 ms was 0.76; a CI run's best was 0.72, failing the
    # old check that some 100 ms exceed 0.8), so the test asks for the
    # move, not for how fast CUBIC grows.
    after = t_action + 300_000
    assert max(x["utilisation"] for x in rows(res.queue, link="primary") if x["time_us"] > after) < 0.05
    alt = [x["utilisation"] for x in rows(res.queue, link="alt1") if x["time_us"] > after]
    assert statistics.mean(alt) > 0.5, alt


def test_iperf3_flows_are_refused_with_a_network(core):
    r = runspec(*TWO_PATHS, [flow(0, "a", "b", *PRIMARY, tool="iperf3")], 1.0)
    with pytest.raises(UsageError, match="iperf3"):
        LinuxBackend().run(r)


STUDY = """
[study]
name = "two-paths"
duration = "3s"

[topology]
hosts = ["a", "b"]
routers = ["r1", "r2", "r3"]

[[topology.links]]
between = ["a", "r1"]
rate = "1Gbit"

[[topology.links]]
between = ["r2", "b"]
rate = "1Gbit"

[[topology.links]]
name = "primary"
between = ["r1", "r2"]
rate = "100Mbit"
delay = "10ms"

[[topology.links]]
between = ["r1", "r3"]
rate = "100Mbit"
delay = "15ms"

[[topology.links]]
between = ["r3", "r2"]
rate = "100Mbit"
delay = "15ms"

[[flows]]
cca = "cubic"
kind = "rpc"
request = "1KB"
response = "100B"
think = "5ms"
src = "a"
dst = "b"

[[events]]
at = "1.5s"
flows = [0]
path = ["r1", "r3", "r2"]
"""


def test_a_study_with_a_route_change_on_sim_and_linux(core, tmp_path, monkeypatch):
    """The same study file on both backends: the same links in the queue
    table, the same route event, the RPC latency following the path."""
    from ccbench.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text(STUDY)
    got = {}
    for backend in ("sim", "linux"):
        assert main(["run", "s.toml", "--backend", backend, "--out", backend]) == 0
        with Store.open_existing(tmp_path / backend) as st:
            (run,) = st.runs()
            rid = run.run_id
            con = st.con
            links = sorted(r[0] for r in con.execute("select distinct link from queue where run_id = ?", [rid]).fetchall())
            events = con.execute("select time_us, kind, flow_id from events where run_id = ?", [rid]).fetchall()
            lat = con.execute("select min(latency_us) filter (where start_us < 1400000), "
                              "min(latency_us) filter (where start_us > 2000000) from rpcs where run_id = ?",
                              [rid]).fetchone()
            got[backend] = (links, events, lat)
    assert got["sim"][0] == got["linux"][0] == sorted(["primary", "primary/back", "r1-r3", "r3-r1", "r3-r2", "r2-r3"])
    assert got["sim"][1] == got["linux"][1] == [(1_500_000, "route", 0)]
    for backend, (_, _, (before, after)) in got.items():
        assert 20_000 <= before <= 21_000 and 60_000 <= after <= 61_000, (backend, before, after)


def test_network_plan_names_and_addresses():
    """A namespace per host node, named so doctor --cleanup recognises them."""
    hosts = [f"n{i}" for i in range(netns.MAX_HOSTS)]
    topo = netns.plan_network("0123abcd", hosts, 1500)
    assert topo.receiver is None and list(topo.nodes) == hosts
    names = [topo.router_ns, topo.tun] + [x for h in topo.hosts for x in (h.ns, h.ifname, h.router_ifname)]
    assert all(netns.NAME_RE.match(n) and len(n) <= 15 for n in names), names
    assert len(set(names)) == len(names) - len(hosts)  # a host's namespace and its veth share a name
    assert len({h.ip for h in topo.hosts} | {h.router_ip for h in topo.hosts}) == 2 * len(hosts)
    assert topo.describe()["hosts"][3]["node"] == "n3"
    with pytest.raises(netns.SetupError, match="at most|2 to 64"):
        netns.plan_network("0123abcd", hosts + ["one-more"], 1500)


def test_sigkilled_network_run_then_doctor_cleanup(core, tmp_path):
    """A network run killed with SIGKILL leaves its host namespaces and
    processes; ccbench doctor --cleanup removes every one of them."""
    import signal
    import subprocess
    import sys
    import time

    from ccbench.cli import main

    p = tmp_path / "s.toml"
    p.write_text(STUDY.replace('duration = "3s"', 'duration = "30s"'))
    runner = textwrap.dedent(f"""
        from ccbench.backends.linux.backend import LinuxBackend
        from ccbench.spec import load_study
        LinuxBackend().run(load_study({str(p)!r}, backend="linux").runs()[0])
    """)
    proc = subprocess.Popen([sys.executable, "-c", runner], start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        run = None
        while time.monotonic() < deadline and run is None:
            mine = [r for r in cleanup.find(include_live=True) if r.owner == proc.pid]
            if mine and len(mine[0].namespaces) == 3 and (mine[0].dir / "emu.stats.jsonl").exists():
                run = mine[0]
            time.sleep(0.1)
        assert run is not None, "the run did not start"
        OURS.add(run.token)
        assert sorted(n.split("-")[-1] for n in run.namespaces) == ["h0", "h1", "r"]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        (left,) = [r for r in cleanup.find() if r.token == run.token]
        assert left.namespaces and left.pids and left.dir
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert main(["doctor", "--cleanup"]) == 0
    assert not [r for r in cleanup.find(include_live=True) if r.token == run.token and not r.empty()]
