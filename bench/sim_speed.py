#!/usr/bin/env python3
"""Simulator speed: fixed dumbbell scenarios (and a parking lot) on ccbench's
simulator and, where Debian's ns-3 is installed, the same dumbbell scenarios in
ns-3, measured in the same run so the ratio is fair on a noisy machine.

    python bench/sim_speed.py [--quick] [--no-ns3] [--reps N]

Prints per scenario: ccbench's wall time (median of --reps runs, one core;
with ns-3, of --reps runs before ns-3's run and --reps after it),
simulated seconds per wall second, bottleneck packets per wall second,
aggregate goodput and Jain's index; and for ns-3 the same plus the wall-time
ratio and the goodput difference. Then:

- the per-packet speed of the paced (10 BBR) and many-flow (100 CUBIC on
  FQ-CoDel) scenarios as a fraction of the headline's (target >= 0.75):
  the median over at least 5 pairs of runs, each pair back to back (the
  ratio of the medians above is printed beside it); with ns-3, its own
  many-flow figure beside it (one run each: the same scenarios slow ns-3
  down too, which says how much of the fall is the workload's); and, as a
  diagnostic, the many-flow ratio with every window clamped so that both
  scenarios do the same work per packet (see `equal_work_ratio`), and
  another with FQ-CoDel serving each flow runs of packets instead of one
  at a time (see `interleaving_ratio`), and the same flows on a FIFO and
  on CoDel (see `discipline_ratios`);
- "1040 flows": 1024 NewReno + 16 CUBIC over 10 Gbit/s, 50 ms, a 41667-packet
  FIFO (one BDP), each run in its own child process so that its peak memory
  can be read honestly: the child's peak resident set (`ru_maxrss`, the
  Python interpreter and ccbench included) alongside its bottleneck packets
  per wall second (targets >= 1 M packets/s, <= 1 GB);
- the headline scenario with BPF Reno (studies/bpf-cca/reno.bpf.c in the
  simulator's eBPF VM) against the native reno, runs interleaved: the
  wall-time ratio (the target is at most 2x).

With ns-3 the whole bench takes about 17 minutes (ns-3's 100-flow run
alone about 5). The load average is printed first: only ratios within one
run mean much on a shared machine. Nothing here is a test: it prints
figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from ccbench import _core

HERE = Path(__file__).resolve().parent
NS3_BIN = HERE / "out" / "ns3-dumbbell"
MSS = 1448
# ns-3's point-to-point links add a 2-byte PPP header to each 1500-byte IP
# packet; the simulator is given the same wire size so both see one link.
WIRE_HEADER = 52 + 2


def scenario(label, flows, cca, ns3_tcp, rate_bps, rtt_ms, duration_s, qdisc="fifo", buffer_pkts=None, extra=(),
             spread_ms=0, parking_links=0, cwnd_clamp=None):
    """`extra`: more (cca, count) flow groups beside the `flows` × `cca` ones;
    `spread_ms`: flow starts spread evenly over this time (0: all at once);
    `parking_links` > 0: a parking lot of that many links instead of the
    dumbbell (see `parking_lot_network`); `cwnd_clamp`: every flow's window
    capped at this many packets (None: not capped)."""
    return dict(label=label, flows=flows, cca=cca, ns3_tcp=ns3_tcp, rate_bps=rate_bps, rtt_ms=rtt_ms,
                duration_s=duration_s, qdisc=qdisc, buffer_pkts=buffer_pkts, extra=list(extra), spread_ms=spread_ms,
                parking_links=parking_links, cwnd_clamp=cwnd_clamp)


def title(sc) -> str:
    rate = f"{sc['rate_bps'] / 1e9:g} Gbit/s" if sc["rate_bps"] >= 1e9 else f"{sc['rate_bps'] / 1e6:g} Mbit/s"
    mix = " + ".join(f"{n} {c}" for c, n in [(sc["cca"], sc["flows"]), *sc["extra"]])
    buf = f"{sc['buffer_pkts']} pkt" if sc["buffer_pkts"] else "1 BDP"
    links = f" x {sc['parking_links']} links" if sc.get("parking_links") else ""
    return f"{sc['label']}: {mix}, {rate}{links}, {sc['rtt_ms']} ms, {buf} {sc['qdisc']}, {sc['duration_s']} s"


def parking_lot_network(sc, bdp_pkts):
    """Routers r0 → … → rN over links L1..LN (rate, qdisc and buffer of the
    scenario; RTT split over the links), pipes back; host `a` → r0 and rN → `z`
    for the long flow, `s<i>` → r<i-1> and r<i> → `d<i>` for short flow i.
    Returns the network and the flows' src/dst/path."""
    n = sc["parking_links"]
    delay = int(sc["rtt_ms"] / 2 / n * 1e6)
    nodes = [{"name": f"r{i}", "kind": "router"} for i in range(n + 1)] + [
        {"name": h, "kind": "host"} for h in ["a", "z", *[f"{x}{i}" for i in range(1, n + 1) for x in "sd"]]]
    links = []

    def pipe(name, a, b, delay_ns=0):
        links.append({"name": name, "from": a, "to": b, "rate_bps": 10_000_000_000, "delay_ns": delay_ns,
                      "loss": 0.0, "buffer_bytes": None, "buffer_pkts": None})

    for i in range(1, n + 1):
        links.append({"name": f"L{i}", "from": f"r{i - 1}", "to": f"r{i}", "rate_bps": int(sc["rate_bps"]),
                      "delay_ns": delay, "loss": 0.0, "buffer_bytes": None, "buffer_pkts": bdp_pkts,
                      "qdisc": sc["qdisc"]})
        pipe(f"L{i}/back", f"r{i}", f"r{i - 1}", delay)
        for h, r in [(f"s{i}", f"r{i - 1}"), (f"d{i}", f"r{i}")]:
            pipe(f"{h}-{r}", h, r)
            pipe(f"{r}-{h}", r, h)
    for h, r in [("a", "r0"), ("z", f"r{n}")]:
        pipe(f"{h}-{r}", h, r)
        pipe(f"{r}-{h}", r, h)
    ends = [("a", "z", ["a-r0", *[f"L{i}" for i in range(1, n + 1)], f"r{n}-z"])] + [
        (f"s{i}", f"d{i}", [f"s{i}-r{i - 1}", f"L{i}", f"r{i}-d{i}"]) for i in range(1, n + 1)]
    return {"nodes": nodes, "links": links}, ends


def buffer_pkts(sc) -> int:
    """The bottleneck's buffer: the scenario's, else one BDP of packets."""
    return sc["buffer_pkts"] or round(sc["rate_bps"] * sc["rtt_ms"] / 1e3 / 8 / (MSS + WIRE_HEADER))


def start_gap_ns(sc) -> int:
    """Flow i starts at i times this: the starts spread over `spread_ms`."""
    return sc["spread_ms"] * 1_000_000 // (sc["flows"] + sum(n for _, n in sc["extra"]))


def sim_config(sc) -> dict:
    bdp_pkts = buffer_pkts(sc)
    ccas = [sc["cca"]] * sc["flows"] + [c for c, n in sc["extra"] for _ in range(n)]
    cfg = {
        "seed": 1,
        "duration_ns": int(sc["duration_s"] * 1e9),
        "sample_interval_ns": 100_000_000,
        "tcp": {
            "mss": MSS, "header_bytes": WIRE_HEADER, "init_cwnd": 10, "min_rto_ns": 200_000_000,
            "delayed_ack": "linux", "delack_ns": 40_000_000, "sack": True,
            # Large buffers so neither side limits the CCA, as in the ns-3 program.
            "rmem_bytes": 32 << 20, "wmem_bytes": 32 << 20, "ecn": False, "pacing": "auto", "hz": None,
        },
    }
    if sc.get("parking_links"):
        network, ends = parking_lot_network(sc, bdp_pkts)
        return {**cfg, "network": network, "flows": [
            {"id": i, "cca": sc["cca"], "kind": "bulk", "src": s, "dst": d, "path": path, "start_ns": 0,
             "stop_ns": None} for i, (s, d, path) in enumerate(ends)]}
    return {
        **cfg,
        "senders": [{"rate_bps": 10_000_000_000, "delay_ns": 0} for _ in ccas],
        "bottleneck": {"rate_bps": int(sc["rate_bps"]), "delay_ns": int(sc["rtt_ms"] / 2 * 1e6), "loss": 0.0,
                       "buffer_bytes": None, "buffer_pkts": bdp_pkts, "qdisc": sc["qdisc"]},
        "reverse": None,
        "flows": [{"id": i, "cca": c, "sender": i, "kind": "bulk", "start_ns": i * start_gap_ns(sc),
                   "stop_ns": None, "cwnd_clamp": sc["cwnd_clamp"]} for i, c in enumerate(ccas)],
    }


def jain(xs):
    xs = list(xs)
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)) if any(xs) else 0.0


def timed_simulate(cfg: str):
    """One simulator run of a JSON config: (wall seconds, decoded result)."""
    t0 = time.perf_counter()
    res = json.loads(_core.simulate(cfg))
    return time.perf_counter() - t0, res


def run_sim(sc, reps):
    cfg = json.dumps(sim_config(sc))
    walls, res = [], None
    for _ in range(reps):
        wall, res = timed_simulate(cfg)
        walls.append(wall)
    wall = statistics.median(walls)
    gps = [f["goodput_bps"] for f in res["flows"]]
    return dict(wall=wall, walls=walls, goodput=sum(gps), jain=jain(gps), pkts=res["stats"]["bottleneck_pkts"])


# Run one config in this child process and report its wall time and peak RSS.
CHILD = """
import json, resource, sys, time
from ccbench import _core
cfg = sys.stdin.read()
t0 = time.perf_counter()
res = json.loads(_core.simulate(cfg))
wall = time.perf_counter() - t0
print(json.dumps(dict(wall=wall, pkts=res["stats"]["bottleneck_pkts"],
                      goodputs=[f["goodput_bps"] for f in res["flows"]],
                      maxrss_kb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)))
"""


def run_sim_child(sc, reps):
    """Like `run_sim`, each run in a fresh Python child: adds `rss_mb`, the
    largest peak resident set of those children (Linux ru_maxrss, in KiB)."""
    cfg = json.dumps(sim_config(sc))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in [str(Path(_core.__file__).parent.parent),
                                                                    os.environ.get("PYTHONPATH")] if p))
    outs = []
    for _ in range(reps):
        out = subprocess.run([sys.executable, "-c", CHILD], input=cfg, capture_output=True, text=True, env=env)
        if out.returncode != 0:
            raise RuntimeError(f"child simulation failed: {out.stderr.strip()[-500:]}")
        outs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    walls = [o["wall"] for o in outs]
    gps = outs[-1]["goodputs"]
    return dict(wall=statistics.median(walls), walls=walls, goodput=sum(gps), jain=jain(gps), pkts=outs[-1]["pkts"],
                rss_mb=max(o["maxrss_kb"] for o in outs) / 1024)


def ns3_available() -> bool:
    source = HERE / "ns3" / "dumbbell.cc"
    if NS3_BIN.exists() and NS3_BIN.stat().st_mtime >= source.stat().st_mtime:
        return True
    if shutil.which("pkg-config") is None:
        return False
    probe = subprocess.run(["pkg-config", "--exists", "ns3-core"], capture_output=True)
    if probe.returncode != 0:
        return False
    build = subprocess.run(["bash", str(HERE / "ns3" / "build.sh")], capture_output=True, text=True)
    if build.returncode != 0:
        print(build.stderr, file=sys.stderr)
    return NS3_BIN.exists()


def run_ns3(sc):
    """The scenario in ns-3 (dumbbells of one CCA on a FIFO or FQ-CoDel)."""
    args = [str(NS3_BIN), f"--flows={sc['flows']}", f"--rate={sc['rate_bps']}bps", f"--rtt={sc['rtt_ms']}ms",
            "--accessDelay=0ms", f"--bufferPkts={buffer_pkts(sc)}", f"--duration={sc['duration_s']}s",
            f"--tcp={sc['ns3_tcp']}", "--seed=1", f"--qdisc={sc['qdisc']}", f"--startGap={start_gap_ns(sc)}ns"]
    t0 = time.perf_counter()
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    res = json.loads(out.stdout.strip().splitlines()[-1])
    gps = [f["goodput_bps"] for f in res["flows"]]
    return dict(wall=wall, goodput=sum(gps), jain=jain(gps), pkts=res.get("bottleneck_pkts", 0))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short scenarios only (seconds, no ns-3)")
    ap.add_argument("--no-ns3", action="store_true", help="skip ns-3 even where it is installed")
    ap.add_argument("--reps", type=int, default=3, help="ccbench runs per scenario (median wall time)")
    args = ap.parse_args()

    newreno = "newreno" if "newreno" in _core.algorithms() else "reno"
    scenarios = [
        scenario("headline", 10, "cubic", "cubic", 1e9, 20, 30),
        scenario("vs NewReno", 10, newreno, "newreno", 1e9, 20, 30),
        scenario("single", 1, "cubic", "cubic", 1e8, 20, 30),
        scenario("paced", 10, "bbr", None, 1e9, 20, 30),  # ns-3 3.37's BBR is broken
        scenario("many flows", 100, "cubic", "cubic", 1e9, 20, 30, qdisc="fq_codel", spread_ms=100),
        scenario("cebinae", 16, newreno, None, 1e8, 50, 60, qdisc="cebinae", buffer_pkts=420, extra=[("cubic", 1)],
                 spread_ms=100),
        # Long flow + one short flow per link; Mpkt/s counts packets over every link.
        scenario("parking lot", 4, "cubic", None, 1e9, 20, 30, qdisc="fq", parking_links=3),
    ]
    # Many flows at scale: run in child processes to read their peak memory.
    large = scenario("1040 flows", 1024, newreno, None, 10e9, 50, 10, buffer_pkts=41667, extra=[("cubic", 16)])
    if args.quick:
        scenarios = [dict(sc, duration_s=3) for sc in scenarios]
        large = dict(large, duration_s=3)
    use_ns3 = not args.quick and not args.no_ns3 and ns3_available()
    print(f"ccbench { _core.__version__} on {os.cpu_count()} cores; ns-3: {'yes' if use_ns3 else 'not run'}; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'scenario':<72} {'wall s':>7} {'sim-s/s':>8} {'Mpkt/s':>7} {'Mbit/s':>8} {'JFI':>5}")
    mpkts, ns3_mpkts = {}, {}
    for sc in scenarios:
        r = run_sim(sc, args.reps)
        n = run_ns3(sc) if use_ns3 and sc["ns3_tcp"] else None
        if n is not None:
            # ccbench's runs on both sides of ns-3's minute or more, so that
            # a slow spell of this shared machine weighs on both alike.
            after = run_sim(sc, args.reps)
            r = dict(r, walls=r["walls"] + after["walls"], wall=statistics.median(r["walls"] + after["walls"]))
        mpkts[sc["label"]] = r["pkts"] / r["wall"] / 1e6
        print(f"{'ccbench  ' + title(sc):<72} {r['wall']:7.3f} {sc['duration_s'] / r['wall']:8.1f} "
              f"{r['pkts'] / r['wall'] / 1e6:7.2f} {r['goodput'] / 1e6:8.1f} {r['jain']:5.3f}")
        if n is not None:
            ns3_mpkts[sc["label"]] = n["pkts"] / n["wall"] / 1e6
            print(f"{'ns-3     ' + title(sc):<72} {n['wall']:7.3f} {sc['duration_s'] / n['wall']:8.1f} "
                  f"{n['pkts'] / n['wall'] / 1e6:7.2f} {n['goodput'] / 1e6:8.1f} {n['jain']:5.3f}")
            print(f"{'':<9}ratio: ccbench is {n['wall'] / r['wall']:.1f}x faster; "
                  f"goodput differs by {100 * (r['goodput'] / n['goodput'] - 1):+.2f}%")
    by_label = {sc["label"]: sc for sc in scenarios}
    for label in ("paced", "many flows"):
        ratios = interleaved_ratios(by_label["headline"], by_label[label], max(args.reps, 5))
        print(f"{'':<9}{label}: {statistics.median(ratios):.2f} of the headline's packets per second "
              f"(target >= 0.75; median of {len(ratios)} back-to-back pairs, {min(ratios):.2f}-{max(ratios):.2f}; "
              f"from the medians above {mpkts[label] / mpkts['headline']:.2f})")
        if label in ns3_mpkts and "headline" in ns3_mpkts:
            print(f"{'':<9}{label} in ns-3: {ns3_mpkts[label] / ns3_mpkts['headline']:.2f} of its headline's "
                  f"packets per second (one run each)")
    equal_work_ratio(by_label["headline"], by_label["many flows"], max(args.reps, 5))
    interleaving_ratio(by_label["headline"], by_label["many flows"], max(args.reps, 5))
    discipline_ratios(by_label["headline"], by_label["many flows"], max(args.reps, 5))
    r = run_sim_child(large, args.reps)
    print(f"{'ccbench  ' + title(large):<72} {r['wall']:7.3f} {large['duration_s'] / r['wall']:8.1f} "
          f"{r['pkts'] / r['wall'] / 1e6:7.2f} {r['goodput'] / 1e6:8.1f} {r['jain']:5.3f}")
    print(f"{'':<9}1040 flows: {r['pkts'] / r['wall'] / 1e6:.2f} M packets/s (target >= 1), peak RSS "
          f"{r['rss_mb']:.0f} MB (target <= 1024; child process, interpreter included)")
    bpf_vs_native(scenarios[0], args.reps)
    return 0


def interleaved_ratios(base, sc, reps):
    """Per-packet speed of `sc` over `base`, each pair run back to back so
    that a burst of load elsewhere on the machine falls on both sides of
    one ratio rather than on one scenario's runs."""
    cfgs = [json.dumps(sim_config(base)), json.dumps(sim_config(sc))]
    ratios = []
    for _ in range(reps):
        speed = []
        for cfg in cfgs:
            wall, res = timed_simulate(cfg)
            speed.append(res["stats"]["bottleneck_pkts"] / wall)
        ratios.append(speed[1] / speed[0])
    return ratios


def equal_work_ratio(headline, many, reps, inflight=2000):
    """A diagnostic beside the target, not the target: the headline and the
    many-flow scenario with every window clamped so that `inflight` packets
    are in flight in all (a queue under CoDel's 5 ms target at 1 Gbit/s and
    20 ms), so both lose next to nothing (none and 0.03 %) and do the same
    work per packet.
    Their ratio is what the interleaving and FQ-CoDel cost alone; the bench's
    ratio also carries the many-flow scenario's extra loss recovery, which
    the kernel does too (docs/sim-model.md, "seventh round")."""
    pair = [dict(sc, cwnd_clamp=inflight // sc["flows"]) for sc in (headline, many)]
    ratios = interleaved_ratios(*pair, reps)
    print(f"{'':<9}many flows with equal work per packet (every window clamped, {inflight} packets in flight, "
          f"next to no loss): {statistics.median(ratios):.2f} of the clamped headline's packets per second "
          f"(a diagnostic; {min(ratios):.2f}-{max(ratios):.2f})")


def interleaving_ratio(headline, many, reps, run_pkts=20):
    """A diagnostic beside the target, not the target: the many-flow
    scenario with FQ-CoDel's quantum raised from one packet to `run_pkts`,
    so that the round robin serves each flow a run of packets instead of one
    or two: the same events and instructions per packet, a third of the
    first-level data-cache misses, since consecutive packets no longer
    belong to different flows' senders, receivers and access links. The gap
    between this ratio and the bench's is what that per-packet interleaving
    of 100 flows costs (docs/sim-model.md, "Eighth round")."""
    runs = dict(many, qdisc={"kind": "fq_codel", "quantum_bytes": run_pkts * (MSS + WIRE_HEADER)})
    ratios = interleaved_ratios(headline, runs, reps)
    print(f"{'':<9}many flows served in runs (FQ-CoDel quantum {run_pkts} packets, not 1): "
          f"{statistics.median(ratios):.2f} of the headline's packets per second "
          f"(a diagnostic; {min(ratios):.2f}-{max(ratios):.2f})")


def discipline_ratios(headline, many, reps, qdiscs=("fifo", "codel")):
    """A diagnostic beside the target, not the target: the same hundred
    flows on other disciplines. On a drop-tail FIFO their packets leave in
    per-flow bursts and each flow's state stays cached across its burst;
    CoDel keeps the queue short, FQ-CoDel alternates flows packet by
    packet, each packet then meeting its flow's state cold
    (docs/sim-model.md, "Session 41")."""
    for qdisc in qdiscs:
        ratios = interleaved_ratios(headline, dict(many, qdisc=qdisc), reps)
        print(f"{'':<9}many flows on {qdisc} instead: {statistics.median(ratios):.2f} of the headline's packets "
              f"per second (a diagnostic; {min(ratios):.2f}-{max(ratios):.2f})")


def bpf_vs_native(headline, reps):
    """The headline scenario with Reno: native vs BPF, interleaved."""
    from ccbench import bpf

    try:
        obj = bpf.core_cca(bpf.resolve_cca("bpf:reno.bpf.c", HERE.parent / "studies" / "bpf-cca", "sim"))
    except bpf.BpfError as e:
        print(f"BPF Reno: not run ({e})")
        return
    native, mine = dict(headline, cca="reno"), dict(headline, cca=obj)
    cfgs = [json.dumps(sim_config(native)), json.dumps(sim_config(mine))]
    walls = ([], [])
    outs = [None, None]
    for _ in range(reps):
        for i, cfg in enumerate(cfgs):
            wall, outs[i] = timed_simulate(cfg)
            walls[i].append(wall)
    wn, wb = statistics.median(walls[0]), statistics.median(walls[1])
    same = outs[0]["flows"] == outs[1]["flows"]
    name = title(dict(headline, cca="reno"))
    print(f"{'native   ' + name:<72} {wn:7.3f}")
    print(f"{'BPF      ' + name:<72} {wb:7.3f}")
    print(f"{'':<9}ratio: BPF Reno takes {wb / wn:.2f}x the wall time of native reno "
          f"(target <= 2x); results {'identical' if same else 'DIFFER'}")


if __name__ == "__main__":
    sys.exit(main())
