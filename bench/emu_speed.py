#!/usr/bin/env python3
"""How fast can the linux backend's link emulator go on this machine?

For each CCA and bottleneck rate: a hand-built dumbbell (tests/emu_topo.py,
names ``ccbt...``), 20 ms RTT (1 ms access links, 9 ms bottleneck each
way), one BDP of buffer, one bulk flow through the emulator for a few
seconds. Prints per run: goodput against the ceiling (rate × 1448/1500), over
the whole run and in the steady state (from 1 s),
lateness of delivery (p50/p99/max over the run), packets more than the
tolerance late, TUN drops, and the emulator's CPU in the steady state (total,
of it spinning, and the rest: work; 0.95 is the kernel's cap for a
real-time thread, so ~0.95 means saturated). Then, per CCA, the highest rate at which this and
every lower rate kept p99 lateness ≤ 0.5 ms with no TUN drops while the flow
got ≥ 90% of the ceiling in the steady state, and the CPU
at 100 Mbit/s and 1 Gbit/s. Last, the same transfers through a plain tbf
bottleneck on the same namespaces (no emulator, no delay), for rate accuracy.
The emulator runs pinned to one CPU with the hosts' kernel work steered to
the others (docs/linux-backend.md, "Where the work runs"); --baseline adds
the same runs unpinned ("off") for the ratio in the same run.

--hops K,... runs the emulator's network form instead of the dumbbell: the
same hosts joined by a chain of K queueing links (each at the rate, sharing
the 9 ms of one-way delay; K links back the same way), every flow known by
its bound port and crossing all of them, so each packet costs K link
traversals: how the emulator's capacity falls with the size of the graph.

Needs root. Not a test: the figures depend on the machine and on whatever
else runs on it (check `uptime` first).

    python bench/emu_speed.py                        # cubic and bbr, 100M .. 2G
    python bench/emu_speed.py --ccas cubic --rates 100M,1G --duration 3
    python bench/emu_speed.py --baseline             # also unpinned (cpu "off"), same run
    python bench/emu_speed.py --ccas cubic --hops 1,4,16 --rates 100M,400M,1G --no-tbf   # graphs
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from emu_topo import Dumbbell, monotonic_ns, root_problem  # noqa: E402

MS = 1_000_000
P99_MAX_US = 500.0
# A rate counts as held only if the flow also got this much of it after slow start: a path
# whose hosts could not fill it (e.g. starved of CPU) says nothing about the emulator.
STEADY_UTIL_MIN = 0.9


def parse_rate(s: str) -> int:
    s = s.strip().upper()
    mult = {"K": 1e3, "M": 1e6, "G": 1e9}.get(s[-1:], 1)
    return int(float(s.rstrip("KMG")) * mult)


STEADY_FROM_US = 1_000_000


def steady_util(samples: Path, rate: int) -> float:
    """Delivered rate from 1 s to the last sample (after slow start) against
    the payload ceiling rate × 1448/1500: how accurately the path holds its rate."""
    by_t: dict[int, int] = {}
    for line in samples.read_text().splitlines():
        x = json.loads(line)
        by_t[x["time_us"]] = by_t.get(x["time_us"], 0) + x["delivered_bytes"]
    ts = sorted(t for t in by_t if t >= STEADY_FROM_US)
    if len(ts) < 2:
        return float("nan")
    bps = (by_t[ts[-1]] - by_t[ts[0]]) * 8 / ((ts[-1] - ts[0]) / 1e6)
    return bps / (rate * 1448 / 1500)


def one_run(cca: str, rate: int, duration_s: float, flows: int, extra: dict, threaded_napi: bool,
            hops: int | None = None) -> dict:
    dur = int(duration_s * 1e9)
    with tempfile.TemporaryDirectory(prefix="ccbt-bench-") as tmp, Dumbbell(1, threaded_napi=threaded_napi) as db:
        tmp = Path(tmp)
        t0 = monotonic_ns() + 1_500 * MS
        bdp_pkts = max(rate * 20 // 1000 // 8 // 1500, 10)
        server = db.start_core(db.receiver, "load_server", {
            "listen": f"{db.receiver_ip}:5201", "stop_at_monotonic_ns": t0 + dur + 200 * MS})
        if hops is None:
            cfg = db.emu_config(rate_bps=rate, delay_ns=9 * MS, access_delay_ns=1 * MS, buffer_pkts=bdp_pkts, t0=t0,
                                stop_at=t0 + dur + 300 * MS, stats_path=str(tmp / "stats.jsonl"), **extra)
        else:
            cfg = db.chain_config(hops=hops, rate_bps=rate, one_way_ns=9 * MS, access_delay_ns=1 * MS,
                                  buffer_pkts=bdp_pkts, t0=t0, stop_at=t0 + dur + 300 * MS, flows=flows,
                                  stats_path=str(tmp / "stats.jsonl"), **extra)
        emu = db.start_core(db.router, "emu_run", cfg)
        db.wait_attached()
        db.wait_listening(5201)
        client = db.start_core(db.senders[0], "load_client", {
            "server": f"{db.receiver_ip}:5201", "t0_monotonic_ns": t0, "stop_at_monotonic_ns": t0 + dur,
            "sample_interval_ns": 100 * MS, "samples_path": str(tmp / "samples.jsonl"),
            "flows": [{"id": i, "cca": cca, "kind": "bulk", "start_ns": 0,
                       **({"bind_port": 10000 + i} if hops else {})} for i in range(flows)]})
        out = db.result(client, 30 + duration_s)
        db.result(server, 30)
        s = db.result(emu, 30)
        lines = [json.loads(x) for x in (tmp / "stats.jsonl").read_text().splitlines()]
        steady = steady_util(tmp / "samples.jsonl", rate)
    # CPU in the steady state: the intervals from 0.5 s to the end of the traffic.
    busy = [x for x in lines if not x.get("final") and 500_000 < x["time_us"] <= dur // 1000]
    cpu = sum(x["cpu_busy_fraction"] for x in busy) / max(len(busy), 1)
    spin = sum(x["spin_fraction"] for x in busy) / max(len(busy), 1)
    acked = sum(f["bytes_acked"] for f in out["flows"])
    goodput = acked * 8 / duration_s
    lat = s["lateness_us"]
    return {
        "cca": cca, "hops": hops, "rate_bps": rate, "goodput_bps": goodput, "unclassified": s["forwarded_unclassified"], "util": goodput / (rate * 1448 / 1500),
        "steady_util": steady, "emu_cpu": s.get("cpu"), "rps_cpus": s.get("rps_cpus"),
        "p50_us": lat["p50"], "p99_us": lat["p99"], "max_us": lat["max"], "late_pkts": s["late_pkts"],
        "pkts": s["pkts"], "tun_drops": s["tun_tx_dropped"] + s["tun_rx_dropped"],
        "cpu": cpu, "spin": spin,
        "retrans": sum(f["retrans_segs"] for f in out["flows"]), "rt_priority": s.get("rt_priority"),
    }


def one_run_tbf(cca: str, rate: int, duration_s: float, flows: int) -> dict:
    """The same transfer through a plain tbf on the same kind of namespaces
    (no emulator, no delay): how accurately each holds the configured rate."""
    dur = int(duration_s * 1e9)
    with tempfile.TemporaryDirectory(prefix="ccbt-bench-") as tmp, Dumbbell(1) as db:
        tmp = Path(tmp)
        db.bypass_emulator_with_tbf(rate, limit_bytes=max(rate * 20 // 1000 // 8, 15_000))
        t0 = monotonic_ns() + 1_500 * MS
        server = db.start_core(db.receiver, "load_server", {
            "listen": f"{db.receiver_ip}:5201", "stop_at_monotonic_ns": t0 + dur + 200 * MS})
        db.wait_listening(5201)
        client = db.start_core(db.senders[0], "load_client", {
            "server": f"{db.receiver_ip}:5201", "t0_monotonic_ns": t0, "stop_at_monotonic_ns": t0 + dur,
            "sample_interval_ns": 100 * MS, "samples_path": str(tmp / "samples.jsonl"),
            "flows": [{"id": i, "cca": cca, "kind": "bulk", "start_ns": 0} for i in range(flows)]})
        out = db.result(client, 30 + duration_s)
        db.result(server, 30)
        steady = steady_util(tmp / "samples.jsonl", rate)
    goodput = sum(f["bytes_acked"] for f in out["flows"]) * 8 / duration_s
    return {"cca": cca, "rate_bps": rate, "goodput_bps": goodput, "util": goodput / (rate * 1448 / 1500),
            "steady_util": steady}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ccas", default="cubic,bbr")
    ap.add_argument("--rates", default="100M,200M,400M,600M,800M,1G,1.2G,1.5G,2G")
    ap.add_argument("--duration", type=float, default=4.0, help="seconds of traffic per run")
    ap.add_argument("--flows", type=int, default=1)
    ap.add_argument("--spin-ns", type=int, default=None, help="emulator busy-wait before deadlines")
    ap.add_argument("--rt-priority", type=int, default=None, help="emulator SCHED_FIFO priority (0: off)")
    ap.add_argument("--cpu", default=None,
                    help="emulator placement: auto (default: pinned, RPS to the other CPUs), off, or a CPU number")
    ap.add_argument("--baseline", action="store_true",
                    help="also run every rate with --cpu off in the same run, for the ratio against it")
    ap.add_argument("--threaded-napi", action="store_true",
                    help="hosts receive with threaded NAPI (their TCP work leaves the emulator's thread)")
    ap.add_argument("--hops", default=None,
                    help="comma-separated chain lengths: run the network form with that many queueing links "
                         "per direction instead of the dumbbell (0 = the dumbbell, for comparison)")
    ap.add_argument("--json", help="also write the runs here")
    ap.add_argument("--no-tbf", action="store_true", help="skip the comparison against a plain tbf bottleneck")
    a = ap.parse_args()
    problem = root_problem()
    if problem:
        print(f"emu_speed: {problem}", file=sys.stderr)
        return 2
    extra = {}
    if a.spin_ns is not None:
        extra["spin_ns"] = a.spin_ns
    if a.rt_priority is not None:
        extra["rt_priority"] = a.rt_priority or None
    if a.cpu is not None:
        extra["cpu"] = int(a.cpu) if a.cpu.isdigit() else a.cpu
    rates = [parse_rate(r) for r in a.rates.split(",")]
    print(f"load average before: {os.getloadavg()[0]:.2f}; {os.cpu_count()} CPUs; kernel {os.uname().release}")
    hops_list = [int(h) or None for h in a.hops.split(",")] if a.hops else [None]
    print(f"{'cca':6} {'hops':>4} {'rate':>7} {'util':>6} {'steady':>6} {'p50us':>7} {'p99us':>8} {'maxus':>8} {'late':>6} "
          f"{'drops':>5} {'cpu':>5} {'spin':>5} {'work':>5} {'retx':>5}")
    variants = [("placed" if extra.get("cpu", "auto") != "off" else "off", extra)]
    if a.baseline:
        variants.append(("off", {**extra, "cpu": "off"}))
    runs = []
    for cca, hops in [(c, h) for c in a.ccas.split(",") for h in hops_list]:
        for rate in rates:
            for name, ex in variants:
                try:
                    r = one_run(cca, rate, a.duration, a.flows, ex, a.threaded_napi, hops)
                except Exception as e:  # noqa: BLE001 - a busy machine: go on with the next run
                    print(f"{cca:6} {hops or 0:4d} {rate / 1e6:6.0f}M  failed: {type(e).__name__}: {e}", flush=True)
                    continue
                r["variant"] = name if hops is None else f"{name}, {hops} hops"
                runs.append(r)
                if a.json:
                    Path(a.json).write_text(json.dumps(runs, indent=1))
                print(f"{cca:6} {hops or 0:4d} {rate / 1e6:6.0f}M {r['util']:6.3f} {r['steady_util']:6.3f} {r['p50_us'] or 0:7.1f} {r['p99_us'] or 0:8.1f} "
                      f"{r['max_us'] or 0:8.0f} {r['late_pkts']:6d} {r['tun_drops']:5d} {r['cpu']:5.2f} "
                      f"{r['spin']:5.2f} {r['cpu'] - r['spin']:5.2f} {r['retrans']:5d}  {r['variant']} (unclassified {r['unclassified']}) "
                      f"(emulator on CPU {r['emu_cpu']}, RPS to {r['rps_cpus']})", flush=True)
                time.sleep(0.5)
    print()
    names = [(n if h is None else f"{n}, {h} hops", None) for h in hops_list for n, _ in variants]
    for (cca, (name, _)) in [(c, v) for c in a.ccas.split(",") for v in names]:
        ok = None
        for r in sorted((r for r in runs if r["cca"] == cca and r["variant"] == name), key=lambda r: r["rate_bps"]):
            if (r["p99_us"] or 0) <= P99_MAX_US and r["tun_drops"] == 0 and r["steady_util"] >= STEADY_UTIL_MIN:
                ok = r["rate_bps"]
            else:
                break
        best = f"{ok / 1e6:.0f} Mbit/s" if ok else "none of the rates tried"
        print(f"{cca} [{name}]: highest rate with p99 lateness <= {P99_MAX_US:.0f} us, no TUN drops and "
              f">= {STEADY_UTIL_MIN:.0%} of the ceiling after 1 s: {best}")
        for rate in (100_000_000, 1_000_000_000):
            m = [r for r in runs if r["cca"] == cca and r["rate_bps"] == rate and r["variant"] == name]
            if m:
                print(f"{cca} [{name}]: CPU at {rate / 1e6:.0f} Mbit/s: {m[0]['cpu']:.2f} "
                      f"(of it spinning {m[0]['spin']:.2f}, work {m[0]['cpu'] - m[0]['spin']:.2f})")
    if not a.no_tbf:
        print()
        print("rate accuracy, same namespaces: ccbench's emulator (20 ms RTT) vs a plain tbf (no delay).")
        print("steady = delivered rate from 1 s to the end / (rate x 1448/1500); the emulator counts IP bytes,")
        print("tbf counts frames with their 14-byte Ethernet header, so tbf's exact ceiling is 1500/1514 = 0.991.")
        print(f"{'cca':6} {'rate':>7} {'emu steady':>10} {'tbf steady':>10} {'emu whole':>9} {'tbf whole':>9}")
        for r in (r for r in runs if r["variant"] == variants[0][0]):
            t = one_run_tbf(r["cca"], r["rate_bps"], a.duration, a.flows)
            r["tbf_steady_util"], r["tbf_util"] = t["steady_util"], t["util"]
            print(f"{r['cca']:6} {r['rate_bps'] / 1e6:6.0f}M {r['steady_util']:10.3f} {t['steady_util']:10.3f} "
                  f"{r['util']:9.3f} {t['util']:9.3f}", flush=True)
            time.sleep(0.5)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if a.json:
        Path(a.json).write_text(json.dumps(runs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
